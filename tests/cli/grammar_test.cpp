// The one command-line grammar: nouns with verbs (model list|show, cluster list|show|...),
// --torch-version for the PyTorch version, --python for an interpreter, --trace only ever an
// output (an input trace is --from-trace), -o always --out, --model / --cluster / --base take a
// name or a file. Every old spelling still works for one release: the same output, plus exactly
// one note line on stderr that names the new spelling.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/arg_parser.h"
#include "tests/cli/cli_test_util.h"

namespace ddpscope::cli::testing {
namespace {

const std::string kRun = kDataDir + "/replay/mlp-wide-w2.json.gz";
const std::string kModelFile = kDataDir + "/torch/ddp_gloo_model.json";

std::string note(const std::string& command, const std::string& oldFlag,
                 const std::string& newFlag) {
  return "ddpscope " + command + ": note: --" + oldFlag +
         " is deprecated and goes in the next release; use --" + newFlag + "\n";
}

// `oldArgs` prints exactly what `newArgs` prints, and `expectedErr` on stderr.
void expectSameAs(const std::vector<std::string>& oldArgs, const std::vector<std::string>& newArgs,
                  const std::string& expectedErr) {
  const CliResult now = runCliForTest(newArgs);
  ASSERT_EQ(now.exitCode, 0) << now.err;
  EXPECT_EQ(now.err, "");
  const CliResult old = runCliForTest(oldArgs);
  ASSERT_EQ(old.exitCode, 0) << old.err;
  EXPECT_EQ(old.out, now.out);
  EXPECT_EQ(old.err, expectedErr);
}

TEST(GrammarTest, SemanticsIsNowTorchVersion) {
  expectSameAs({"buckets", "--model", "resnet18", "--semantics", "1.13", "--json"},
               {"buckets", "--model", "resnet18", "--torch-version", "1.13", "--json"},
               note("buckets", "semantics", "torch-version"));
  // --flag=value works for an old spelling too.
  expectSameAs({"buckets", "--model", "resnet18", "--semantics=1.13", "--json"},
               {"buckets", "--model", "resnet18", "--torch-version=1.13", "--json"},
               note("buckets", "semantics", "torch-version"));
  // Errors name the new flag.
  expectBadInput({"buckets", "--model", "resnet18", "--torch-version", "2.0"},
                 "--torch-version: expected 2.15 (or current), 1.13 or 1.5, got '2.0'");
}

TEST(GrammarTest, ModelAndClusterTakeANameOrAFile) {
  expectSameAs({"buckets", "--model-file", kModelFile, "--json"},
               {"buckets", "--model", kModelFile, "--json"},
               note("buckets", "model-file", "model"));
  const std::string cluster =
      writeScratchFile("grammar-cluster.json", runCliForTest({"cluster", "show", "dgx-a100"}).out);
  const std::vector<std::string> sim = {"--model", "resnet18", "--nodes", "2", "--json"};
  std::vector<std::string> byName = {"simulate", "--cluster", "dgx-a100"};
  byName.insert(byName.end(), sim.begin(), sim.end());
  std::vector<std::string> byFile = {"simulate", "--cluster", cluster};
  byFile.insert(byFile.end(), sim.begin(), sim.end());
  std::vector<std::string> old = {"simulate", "--cluster-file", cluster};
  old.insert(old.end(), sim.begin(), sim.end());
  const json a = runCliJson(byName);
  const json b = runCliJson(byFile);
  EXPECT_EQ(a["step_time_ns"], b["step_time_ns"]);
  expectSameAs(old, byFile, note("simulate", "cluster-file", "cluster"));
  // Both spellings at once is one flag given twice.
  const CliResult twice =
      runCliForTest({"simulate", "--cluster", "dgx-a100", "--cluster-file", cluster});
  EXPECT_EQ(twice.exitCode, 2);
  EXPECT_EQ(twice.err, note("simulate", "cluster-file", "cluster") +
                           "ddpscope simulate: error: --cluster given twice\n");
  // An unknown name lists the built-ins; a missing file names the file.
  expectBadInput({"allreduce", "--cluster", "dgx-z9", "--bytes", "1M"}, "dgx-a100");
  expectBadInput({"allreduce", "--cluster", "no/such/cluster.json", "--bytes", "1M"},
                 "no/such/cluster.json");
}

TEST(GrammarTest, AnInputTraceIsFromTraceAndTraceIsAlwaysAnOutput) {
  // plan: --trace RUN was the input.
  expectSameAs({"plan", "--trace", kRun, "--json"}, {"plan", "--from-trace", kRun, "--json"},
               note("plan", "trace", "from-trace"));
  // replay: --trace RUN was the input and --trace-out the output.
  const std::string oldOut = (scratchDir() / "grammar-old.json").string();
  const std::string newOut = (scratchDir() / "grammar-new.json").string();
  const CliResult now = runCliForTest(
      {"replay", "--from-trace", kRun, "--bucket-cap-mb", "5", "--trace", newOut, "--json"});
  ASSERT_EQ(now.exitCode, 0) << now.err;
  const CliResult old = runCliForTest(
      {"replay", "--trace", kRun, "--bucket-cap-mb", "5", "--trace-out", oldOut, "--json"});
  ASSERT_EQ(old.exitCode, 0) << old.err;
  EXPECT_EQ(old.out, now.out);
  EXPECT_THAT(old.err, HasSubstr("ddpscope replay: note: --trace RUN.json as the input and "
                                 "--trace-out are deprecated"));
  EXPECT_THAT(old.err, HasSubstr("use --from-trace RUN.json and --trace OUT.json"));
  EXPECT_EQ(std::count(old.err.begin(), old.err.end(), '\n'), 1) << old.err;
  std::ifstream a(oldOut), b(newOut);
  std::stringstream sa, sb;
  sa << a.rdbuf();
  sb << b.rdbuf();
  EXPECT_FALSE(sb.str().empty());
  EXPECT_EQ(sa.str(), sb.str());
  // The old input spelling alone still replays.
  expectSameAs({"replay", "--trace", kRun, "--json"}, {"replay", "--from-trace", kRun, "--json"},
               "ddpscope replay: note: --trace RUN.json as the input and --trace-out are "
               "deprecated and go in the next release; use --from-trace RUN.json and --trace "
               "OUT.json\n");
}

TEST(GrammarTest, PlansTorchIsTorchVersion) {
  expectSameAs(
      {"plan", "--model", "resnet18", "--cluster", "dgx-a100", "--torch", "1.13", "--json"},
      {"plan", "--model", "resnet18", "--cluster", "dgx-a100", "--torch-version", "1.13", "--json"},
      note("plan", "torch", "torch-version"));
}

TEST(GrammarTest, OutIsAlwaysTheOutput) {
  const std::vector<std::string> traces = {kDataDir + "/torch/ddp_gloo_rank0.json.gz",
                                           kDataDir + "/torch/ddp_gloo_rank1.json.gz"};
  const std::string a = (scratchDir() / "grammar-import-a.json").string();
  const std::string b = (scratchDir() / "grammar-import-b.json").string();
  std::vector<std::string> now = {"import-torch", traces[0], traces[1], "--out", a, "--quiet"};
  std::vector<std::string> old = {"import-torch", traces[0], traces[1], "--output", b, "--quiet"};
  const CliResult n = runCliForTest(now);
  ASSERT_EQ(n.exitCode, 0) << n.err;
  const CliResult o = runCliForTest(old);
  ASSERT_EQ(o.exitCode, 0) << o.err;
  EXPECT_EQ(o.err, note("import-torch", "output", "out"));
  EXPECT_TRUE(std::filesystem::exists(b));
  EXPECT_EQ(std::filesystem::file_size(a), std::filesystem::file_size(b));
  // -o is --out.
  expectBadInput({"import-torch", traces[0], "-o"}, "--out: expected a value");
}

TEST(GrammarTest, ValidatesInterpreterIsPython) {
  const CliResult r = runCliForTest({"validate", "--torch", "/no/such/python", "--out",
                                     (scratchDir() / "grammar-validate").string()});
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_EQ(r.err, note("validate", "torch", "python") +
                       "ddpscope validate: error: --python: '/no/such/python' is not an "
                       "executable file\n");
}

TEST(GrammarTest, NounsWithVerbs) {
  CliResult now = runCliForTest({"model", "list"});
  ASSERT_EQ(now.exitCode, 0) << now.err;
  CliResult old = runCliForTest({"models"});
  EXPECT_EQ(old.out, now.out);
  EXPECT_EQ(old.err,
            "ddpscope: note: 'ddpscope models' is deprecated and goes in the next release; use "
            "'ddpscope model list'\n");
  now = runCliForTest({"cluster", "list", "--json"});
  ASSERT_EQ(now.exitCode, 0) << now.err;
  old = runCliForTest({"clusters", "--json"});
  EXPECT_EQ(old.out, now.out);
  EXPECT_EQ(old.err,
            "ddpscope: note: 'ddpscope clusters' is deprecated and goes in the next release; use "
            "'ddpscope cluster list'\n");
  // The top-level help lists the nouns, not the old names.
  const std::string help = runCliForTest({"--help"}).out;
  EXPECT_THAT(help, HasSubstr("\n  model "));
  EXPECT_THAT(help, Not(HasSubstr("\n  models ")));
  EXPECT_THAT(help, Not(HasSubstr("\n  clusters ")));
  expectBadInput({"model", "frobnicate"}, "expected list or show");
}

TEST(GrammarTest, ModelShowDescribesAnyModelSpelling) {
  const json list = runCliJson({"model", "list", "--json"});
  for (const json& row : list) {
    const std::string name = row["name"];
    SCOPED_TRACE(name);
    const json show = runCliJson({"model", "show", name, "--json"});
    EXPECT_EQ(show["num_params"], row["num_params"]);
    EXPECT_EQ(show["num_tensors"], row["num_tensors"]);
    EXPECT_EQ(show["layers"].size(), row["num_layers"].get<size_t>());
    double sum = 0;
    for (const json& layer : show["layers"]) sum += layer["forward_flops"].get<double>();
    EXPECT_NEAR(sum, show["forward_flops"].get<double>(), 1e-9 * sum);
  }
  // resnet18's numbers as torchvision has them: 11,689,512 parameters in 62 tensors.
  const CliResult text = runCliForTest({"model", "show", "resnet18"});
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("11,689,512 in 62 tensors"));
  EXPECT_THAT(text.out, HasSubstr("layer1.0.conv1"));
  // A shorthand and a file work like --model.
  EXPECT_EQ(
      runCliJson({"model", "show", "mlp:in=8,hidden=16,depth=2,out=4", "--json"})["num_params"],
      8 * 16 + 16 + 16 * 4 + 4);  // depth = Linear layers: in -> hidden -> out
  EXPECT_EQ(runCliJson({"model", "show", kModelFile, "--json"})["origin"], kModelFile);
  expectBadInput({"model", "show", "resnet19"}, "resnet19");
  expectBadInput({"model", "show"}, "missing M");
}

TEST(GrammarTest, HelpListsTheOldSpellings) {
  EXPECT_THAT(runCliForTest({"simulate", "--help"}).out,
              HasSubstr("old spellings, accepted with a note until the next release: "
                        "--cluster-file (--cluster) --model-file (--model) --semantics "
                        "(--torch-version)"));
  EXPECT_THAT(runCliForTest({"plan", "--help"}).out,
              HasSubstr("--torch (--torch-version) --trace (--from-trace)"));
}

TEST(GrammarTest, ARenamedFlagOnlyAppliesWhereItsNewFlagExists) {
  ArgParser parser("ddpscope x", "", "test");
  parser.option("bucket-cap-mb", "X", "cap");
  std::ostringstream notes;
  // --semantics is not renamed here: this parser has no --torch-version.
  EXPECT_EQ(parser.parse({"--semantics", "1.13"}, notes).status().message(),
            "unknown flag --semantics (see 'ddpscope x --help')");
  EXPECT_EQ(notes.str(), "");
}

}  // namespace
}  // namespace ddpscope::cli::testing
