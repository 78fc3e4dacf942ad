// `ddpscope validate`: the validation harness's grid, run plan, per-world-size calibration and
// report (sim/validate), as functions returning data. The front end supplies the runner that
// trains (the CLI launches `ddpscope run` under mpirun, or the embedded PyTorch job), because the
// simulator never links the runtime; the harness's types are this verb's request and result.
#pragma once

#include "sim/validate/grid.h"
#include "sim/validate/report.h"
#include "sim/validate/validate.h"
