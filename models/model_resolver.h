// The one model resolver: every command that takes a model (--model, the worker, a trace's
// recorded model, the GUI) accepts the same three spellings, tried in this order:
//   a shorthand   "gpt2:layers=2,embd=64,heads=4,vocab=512,seq=32", "mlp:...", "mlp-branch:..."
//                 (models/builders.h: the runtime builds exactly these models);
//   a zoo name    "resnet50" (models/zoo.h, embedded);
//   a file        "my_model.json", "exports/bert.json" (models/FORMAT.md; a parameter list
//                 suffices): any text with a '/' or ending in ".json", or an existing file.
// Unknown text is NotFound naming the three forms and the zoo's names.
#pragma once

#include <string_view>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"

namespace ddpscope::models {

StatusOr<ModelSpec> resolveModel(std::string_view text);

// The help line commands show for a model argument.
inline constexpr std::string_view kModelArgumentHelp =
    "a zoo model (see 'ddpscope model list'), a shorthand (gpt2:layers=L,embd=E,heads=H,vocab=V,"
    "seq=T | mlp:in=I,hidden=H,depth=D,out=O) or a model JSON file";

}  // namespace ddpscope::models
