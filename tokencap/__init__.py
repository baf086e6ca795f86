"""tokencap: rebuild, inspect and export trainable RL trajectories from captured model calls.

The layers, bottom up: records (schema, validation, digest) -> loading (snapshot JSON,
JSONL, capture-store directories) -> builder (chaining, retries, recovery) -> projection,
verdicts and loss masks -> rollout assembly -> views (frames and figures for the app) ->
command line (`python -m tokencap`).
"""

from typing import TYPE_CHECKING

from .identity import __version__ as __version__  # re-exported: tokencap.__version__
from .lazy import lazy_names

if TYPE_CHECKING:  # the names as type checkers and editors see them
    from .attribution import TerminalAttribution, attribute_terminal
    from .builder import BuildNotes, BuildOutput, Chain, ChainLink, prefix_merging, run_builder
    from .diagnosis import Break, diagnose
    from .digest import compute_digest
    from .loading import FinalResponses, LoadError, load_final_responses, load_snapshots
    from .lossmask import LossMask, loss_mask
    from .projection import assert_prefix_contiguity, project_chain_to_output_items, project_main_chain_response
    from .record_errors import RecordError
    from .records import EngineRefusalRecord, ParentResolutionStatus, TokenCaptureSnapshot, TokenEntry
    from .rollout import RolloutResult, build_rollout

_HOMES = {  # submodule -> the public names it defines (the imports above)
    "attribution": ("TerminalAttribution", "attribute_terminal"),
    "builder": ("BuildNotes", "BuildOutput", "Chain", "ChainLink", "prefix_merging", "run_builder"),
    "diagnosis": ("Break", "diagnose"),
    "digest": ("compute_digest",),
    "loading": ("FinalResponses", "LoadError", "load_final_responses", "load_snapshots"),
    "lossmask": ("LossMask", "loss_mask"),
    "projection": ("assert_prefix_contiguity", "project_chain_to_output_items", "project_main_chain_response"),
    "record_errors": ("RecordError",),
    "records": ("EngineRefusalRecord", "ParentResolutionStatus", "TokenCaptureSnapshot", "TokenEntry"),
    "rollout": ("RolloutResult", "build_rollout"),
}

__getattr__ = lazy_names(__name__, _HOMES)

__all__ = [
    "Break",
    "BuildNotes",
    "BuildOutput",
    "Chain",
    "ChainLink",
    "EngineRefusalRecord",
    "FinalResponses",
    "LoadError",
    "LossMask",
    "ParentResolutionStatus",
    "RecordError",
    "RolloutResult",
    "TerminalAttribution",
    "TokenCaptureSnapshot",
    "TokenEntry",
    "assert_prefix_contiguity",
    "attribute_terminal",
    "build_rollout",
    "compute_digest",
    "diagnose",
    "load_final_responses",
    "load_snapshots",
    "loss_mask",
    "prefix_merging",
    "project_chain_to_output_items",
    "project_main_chain_response",
    "run_builder",
]
