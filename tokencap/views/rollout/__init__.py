"""The Rollout page's parts: one rollout's call tree, detail, link proof, loss mask,
verdicts, exports and the comparison of two builds (no Streamlit).

They build on the shared view data one level up (`views.model`, `views.links`,
`tokencap.services.rollout_sources` and the leaves `formatting`, `style`, `words`), never on the Run page's room
(`views.run`), and nothing shared imports them.
"""
