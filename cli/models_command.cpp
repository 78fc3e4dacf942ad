// `ddpscope model list | show`: the embedded zoo, and one model (a zoo name, a shorthand or a
// model file) as ddpscope sees it: its inputs, parameters, buffers and layers.
#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "api/model_request.h"
#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"

namespace ddpscope::cli {

namespace {

Status runList(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope model list", "[--json] [--csv PATH]",
                   "Lists the embedded model zoo: parameter (element) and tensor counts equal\n"
                   "the originals (torchvision, Hugging Face), as model.parameters() gives them.");
  parser.flag("json", "machine-readable output: a JSON list of models")
      .option("csv", "PATH", "also write the table as CSV");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }

  ASSIGN_OR_RETURN(const std::vector<models::ModelSpec> zoo, api::zooModels());
  const nlohmann::json list = api::modelListJson(zoo);
  std::ostringstream table;
  table << std::left << std::setw(14) << "model" << std::right << std::setw(16) << "parameters"
        << std::setw(9) << "tensors" << std::setw(13) << "fp32 size" << std::setw(8) << "layers"
        << "  description\n";
  for (const models::ModelSpec& model : zoo) {
    table << std::left << std::setw(14) << model.name << std::right << std::setw(16)
          << formatThousands(model.numParams()) << std::setw(9) << model.numTensors()
          << std::setw(13) << formatBytes(model.totalBytes()) << std::setw(8) << model.layers.size()
          << "  " << model.description << "\n";
  }
  if (auto csv = args.value("csv")) {
    RETURN_IF_ERROR(writeCsvFile(
        *csv, {"name", "num_params", "num_tensors", "total_bytes", "num_layers", "description"},
        list));
  }
  if (args.has("json")) {
    io.out << list.dump(2) << "\n";
  } else {
    io.out << table.str();
  }
  return Status::ok();
}

Status runModelShow(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope model show", "M [--json]",
                   "One model as ddpscope sees it: its default inputs, parameter and buffer\n"
                   "counts, and its layers in execution order with their parameters and forward\n"
                   "FLOPs at the default inputs (multiply-add = 2).");
  parser.positional("M", std::string(models::kModelArgumentHelp), true)
      .flag("json", "machine-readable output");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv, io.err));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }
  ASSIGN_OR_RETURN(const models::ModelSpec model, models::resolveModel(args.positionals()[0]));
  const models::ModelInputs& in = model.defaultInputs;
  if (args.has("json")) {
    io.out << api::modelShowJson(model).dump(2) << "\n";
    return Status::ok();
  }
  io.out << model.name << " (" << model.origin << ")";
  if (!model.description.empty()) io.out << ": " << model.description;
  io.out << "\n  default inputs  batch " << in.batch;
  if (in.seqLen > 0) io.out << ", " << in.seqLen << " tokens";
  if (in.imageSize > 0) io.out << ", " << in.imageSize << " px";
  io.out << "\n  parameters      " << formatThousands(model.numParams()) << " in "
         << model.numTensors() << " tensors, " << formatBytes(model.totalBytes()) << "\n"
         << "  buffers         " << model.buffers.size() << "\n"
         << "  layers          " << model.layers.size();
  if (!model.layers.empty()) {
    io.out << ", forward " << std::fixed << std::setprecision(2) << model.forwardFlops(in) / 1e9
           << " GFLOP per step\n\n"
           << std::right << std::setw(5) << "#"
           << "  " << std::left << std::setw(40) << "layer" << std::setw(18) << "type" << std::right
           << std::setw(14) << "parameters" << std::setw(14) << "fwd GFLOP"
           << "\n";
    for (size_t i = 0; i < model.layers.size(); ++i) {
      const models::LayerSpec& layer = model.layers[i];
      io.out << std::right << std::setw(5) << i << "  " << std::left << std::setw(40) << layer.name
             << std::setw(18) << layer.type << std::right << std::setw(14)
             << formatThousands(api::layerParams(model, layer)) << std::setw(14) << std::fixed
             << std::setprecision(3) << layer.forwardFlops.evaluate(in) / 1e9 << "\n";
    }
  } else {
    io.out << " (a parameter list: no compute model)\n";
  }
  return Status::ok();
}

}  // namespace

Status runModelCommand(const std::vector<std::string>& argv, CommandIo io) {
  return runSubcommand(
      "model",
      {{"list", "the embedded model zoo with parameter and tensor counts", runList},
       {"show M", "one model: inputs, parameters, buffers and layers with their FLOPs",
        runModelShow}},
      argv, io);
}

}  // namespace ddpscope::cli
