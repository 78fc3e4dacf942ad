#include <iomanip>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "base/strings.h"
#include "cli/arg_parser.h"
#include "cli/commands.h"
#include "cli/common.h"
#include "models/zoo.h"

namespace ddpscope::cli {

Status runModelsCommand(const std::vector<std::string>& argv, CommandIo io) {
  ArgParser parser("ddpscope models", "[--json]",
                   "Lists the embedded model zoo: parameter (element) and tensor counts equal\n"
                   "the originals (torchvision, Hugging Face), as model.parameters() gives them.");
  parser.flag("json", "machine-readable output: a JSON list of models")
      .option("csv", "PATH", "also write the table as CSV");
  ASSIGN_OR_RETURN(ParsedArgs args, parser.parse(argv));
  if (args.helpRequested()) {
    io.out << parser.helpText();
    return Status::ok();
  }

  nlohmann::json list = nlohmann::json::array();
  std::ostringstream table;
  table << std::left << std::setw(14) << "model" << std::right << std::setw(16) << "parameters"
        << std::setw(9) << "tensors" << std::setw(13) << "fp32 size" << std::setw(8) << "layers"
        << "  description\n";
  for (const std::string& name : models::zooModelNames()) {
    ASSIGN_OR_RETURN(models::ModelSpec model, models::loadZooModel(name));
    list.push_back({{"name", model.name},
                    {"num_params", model.numParams()},
                    {"num_tensors", model.numTensors()},
                    {"total_bytes", model.totalBytes()},
                    {"num_layers", model.layers.size()},
                    {"description", model.description}});
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

}  // namespace ddpscope::cli
