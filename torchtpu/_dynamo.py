"""The "tpu" torch.compile backend (found by Dynamo through the torch_dynamo_backends entry point).

For now it runs the captured FX graph op by op on the tpu device, i.e. with eager semantics and
eager speed. It exists so that code which compiles for its device (Hugging Face's generate()
with a static cache compiles with backend="tpu") runs unchanged; a backend that compiles the
whole graph into one XLA program comes with the torch.compile work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch


def tpu_backend(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> Callable[..., Any]:
    return gm.forward
