"""tokencap's app, as a checkout runs it: ``streamlit run app.py [-- PATH ...]``.

The app itself is in the package (`tokencap/app/main.py`, which `tokencap app` runs, from a
checkout or an installed wheel); this file only calls it, so both start the same app.
"""

from tokencap.app.main import main

main()
