#!/usr/bin/env python3
"""The PyTorch model exporter, as a script and as the module `torch_export`.

The exporter itself lives in the ddpscope Python package (python/ddpscope/export.py; in Python:
`ddpscope.Model.from_torch(module, example_input)`). This file keeps the script and
`from torch_export import export_model` working from a checkout without building the package:
it loads that one file by path (importing the package would need its compiled core).

    python3 models/export/torch_export.py --module torchvision.models:resnet18 \\
        --input-shape 8,3,224,224 -o resnet18.json [--measure]
"""

import importlib.util
import os
import sys

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "ddpscope",
                     "export.py")
_spec = importlib.util.spec_from_file_location("ddpscope_torch_export", _PATH)
_impl = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_impl)
globals().update({k: v for k, v in vars(_impl).items() if not k.startswith("__")})

if __name__ == "__main__":
    sys.exit(_impl.main())
