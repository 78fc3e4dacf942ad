"""ddpscope inside a PyTorch DDP job (imports torch):

- ``ddpscope.torch.record(ddp_model, path=...)``: the live recorder (``_recorder.py``), a trace
  of the job's own steps that ``ddpscope replay``, ``plan --from-trace`` and the GUI open;
- ``ddpscope.torch.tune(ddp_model, train_step, optimizer=...)``: bucket tuning inside the job
  (``tune.py``), measured in interleaved rounds of real training steps;
- ``ddpscope.torch.layer_ranges(ddp_model)``: while profiling with ``torch.profiler``, every
  module's forward in a ``ddpscope.layer:<path>`` range (``_layer_ranges.py``), by which
  ``ddpscope import-torch`` names the trace's layers.
"""

from ._layer_ranges import layer_ranges
from ._recorder import Recorder, record
from .tune import TuneError, TuneResult, tune

__all__ = ["record", "Recorder", "tune", "TuneError", "TuneResult", "layer_ranges"]
