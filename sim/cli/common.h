// Helpers shared by the CLI subcommands.
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "models/model_spec.h"
#include "sim/cli/arg_parser.h"

namespace ddpscope::cli {

// Adds --model NAME and --model-file PATH to a parser.
void addModelFlags(ArgParser& parser);
// Loads the model named by exactly one of --model / --model-file.
StatusOr<models::ModelSpec> loadModelFromFlags(const ParsedArgs& args);

// Parses "3,2,1,0" (commas and/or whitespace) into parameter indices; `what` names
// the source in errors (e.g. "--ready-order").
StatusOr<std::vector<int>> parseIndexList(const std::string& text, const std::string& what);
// Reads a ready order file: a JSON array of ints, a JSON object with "grad_ready_order",
// or plain text of ints separated by commas/whitespace.
StatusOr<std::vector<int>> readIndexListFile(const std::string& path);

}  // namespace ddpscope::cli
