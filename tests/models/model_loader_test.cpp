// parseModelJson / loadModelFile: valid documents and every rejected case. Each error must
// name the origin, the JSON path and what was expected.
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>

#include "models/model_spec.h"

namespace ddpscope::models {
namespace {

const std::string kDataDir = DDPSCOPE_TEST_DATA_DIR;

// A valid two-layer model; tests splice bad parts into it.
std::string modelWithLayers(const std::string& layers, const std::string& extraParams = "") {
  return R"({"name": "m", "parameters": [
      {"name": "fc1.weight", "shape": [4, 3]}, {"name": "fc1.bias", "shape": [4]},
      {"name": "fc2.weight", "shape": [2, 4]}, {"name": "fc2.bias", "shape": [2]})" +
         extraParams + R"(], "layers": )" + layers + "}";
}

// Asserts the parse fails with `code` and a message holding every fragment.
void expectError(const std::string& text, StatusCode code,
                 std::initializer_list<std::string> fragments,
                 const std::string& origin = "model.json") {
  StatusOr<ModelSpec> spec = parseModelJson(text, origin);
  ASSERT_FALSE(spec.isOk()) << text;
  EXPECT_EQ(spec.status().code(), code);
  const std::string& message = spec.status().message();
  EXPECT_EQ(message.rfind(origin + ": ", 0), 0u) << message;
  for (const std::string& fragment : fragments) {
    EXPECT_NE(message.find(fragment), std::string::npos)
        << "missing \"" << fragment << "\" in: " << message;
  }
}

TEST(ModelLoaderTest, ParsesFullLayerEntry) {
  StatusOr<ModelSpec> spec = parseModelJson(modelWithLayers(R"([
        {"name": "fc1", "type": "Linear", "params": ["fc1.weight", "fc1.bias"],
         "flops": {"batch": 28, "1": 1}, "bytes": {"batch*seq*seq": 2.5},
         "backward_flops": {"batch": 30}, "attrs": {"in_features": 3, "bias": true}},
        {"name": "fc2", "type": "Linear", "params": ["fc2.weight", "fc2.bias"],
         "grad_ready_order": ["fc2.weight", "fc2.bias"], "inputs": ["@input", "fc1"],
         "use": {"period": 2, "phase": 1, "ranks": [0, 3]}}])"),
                                            "inline");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->name, "m");
  EXPECT_EQ(spec->origin, "inline");
  ASSERT_EQ(spec->layers.size(), 2u);
  const LayerSpec& fc1 = spec->layers[0];
  EXPECT_EQ(fc1.params, (std::vector<int>{0, 1}));
  EXPECT_EQ(fc1.gradReadyOrder, (std::vector<int>{1, 0}));  // Linear default: bias first
  EXPECT_DOUBLE_EQ(fc1.forwardFlops.evaluate({.batch = 2}), 57.0);
  EXPECT_DOUBLE_EQ(fc1.forwardBytes.evaluate({.batch = 2, .seqLen = 3}), 45.0);
  ASSERT_TRUE(fc1.backwardFlops.has_value());
  EXPECT_DOUBLE_EQ(fc1.attrs.at("bias"), 1.0);
  EXPECT_TRUE(fc1.inputs.empty());
  EXPECT_FALSE(fc1.use.has_value());
  const LayerSpec& fc2 = spec->layers[1];
  EXPECT_EQ(fc2.gradReadyOrder, (std::vector<int>{2, 3}));  // explicit order wins
  EXPECT_EQ(fc2.inputs, (std::vector<std::string>{"@input", "fc1"}));
  ASSERT_TRUE(fc2.use.has_value());
  EXPECT_EQ(fc2.use->period, 2);
  EXPECT_EQ(fc2.use->phase, 1);
  EXPECT_EQ(fc2.use->ranks, (std::vector<int>{0, 3}));
  EXPECT_EQ(spec->gradReadyOrder(), (std::vector<int>{2, 3, 1, 0}));
}

TEST(ModelLoaderTest, AcceptsParameterOnlyFile) {
  StatusOr<ModelSpec> spec = loadModelFile(kDataDir + "/models/params_only.json");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->name, "params-only");
  EXPECT_FALSE(spec->hasLayers());
  EXPECT_EQ(spec->numTensors(), 4);
  EXPECT_EQ(spec->numParams(), 64000 + 4096 + 64 + 1);
  EXPECT_EQ(spec->params[1].dtype, DType::kFloat16);
  EXPECT_EQ(spec->params[2].dtype, DType::kFloat16);
  EXPECT_TRUE(spec->params[3].shape.empty());
  EXPECT_EQ(spec->totalBytes(), (64000 + 1) * 4 + (4096 + 64) * 2);
  EXPECT_EQ(spec->gradReadyOrder(), (std::vector<int>{3, 2, 1, 0}));

  StatusOr<ModelSpec> minimal =
      parseModelJson(R"({"name": "m", "parameters": [{"name": "w", "shape": [3]}]})", "x");
  ASSERT_TRUE(minimal.isOk()) << minimal.status().message();
  EXPECT_TRUE(minimal->layers.empty());
  EXPECT_TRUE(minimal->buffers.empty());
}

TEST(ModelLoaderTest, MissingFileIsNotFound) {
  StatusOr<ModelSpec> spec = loadModelFile(kDataDir + "/models/no_such_model.json");
  ASSERT_FALSE(spec.isOk());
  EXPECT_EQ(spec.status().code(), StatusCode::kNotFound);
  EXPECT_NE(spec.status().message().find("no_such_model.json"), std::string::npos);
}

TEST(ModelLoaderTest, RejectsUnknownDtypeNamingFieldAndFile) {
  const std::string path = kDataDir + "/models/bad_dtype.json";
  StatusOr<ModelSpec> spec = loadModelFile(path);
  ASSERT_FALSE(spec.isOk());
  EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(spec.status().message(),
            path +
                ": parameters[2].dtype: expected one of float32, float16, bfloat16, float64, "
                "int64, int32, int8, uint8, bool; got \"float33\"");
}

TEST(ModelLoaderTest, RejectsInvalidJsonWithByteOffset) {
  expectError(R"({"name": "m", "parameters": [}")", StatusCode::kInvalidArgument,
              {"expected valid JSON", "at byte 30", "line 1, column 30"});
}

TEST(ModelLoaderTest, RejectsNonObjectRoot) {
  expectError("[1, 2]", StatusCode::kInvalidArgument, {"(root)", "expected a JSON object"});
}

TEST(ModelLoaderTest, RejectsMissingOrWrongTypedName) {
  expectError(R"({"parameters": [{"name": "w", "shape": [1]}]})", StatusCode::kInvalidArgument,
              {"name: expected a non-empty string", "missing"}, "zoo:broken");
  expectError(R"({"name": 7, "parameters": [{"name": "w", "shape": [1]}]})",
              StatusCode::kInvalidArgument, {"name: expected a non-empty string; got 7"});
}

TEST(ModelLoaderTest, RejectsMissingOrEmptyParameters) {
  expectError(R"({"name": "m"})", StatusCode::kInvalidArgument,
              {"parameters: expected a non-empty array"});
  expectError(R"({"name": "m", "parameters": []})", StatusCode::kInvalidArgument,
              {"parameters: expected a non-empty array", "got an array []"});
  expectError(R"({"name": "m", "parameters": {"w": [1]}})", StatusCode::kInvalidArgument,
              {"parameters: expected a non-empty array", "got an object"});
}

TEST(ModelLoaderTest, RejectsDuplicateParameterNames) {
  expectError(
      modelWithLayers("[]", R"(, {"name": "fc1.bias", "shape": [4]})"),
      StatusCode::kInvalidArgument,
      {"parameters[4].name", "expected a unique parameter name", "parameters[1]", "\"fc1.bias\""});
}

TEST(ModelLoaderTest, RejectsBadShapeDims) {
  expectError(R"({"name": "m", "parameters": [{"name": "a", "shape": [2]},
                 {"name": "b", "shape": [3, 0]}]})",
              StatusCode::kInvalidArgument,
              {"parameters[1].shape[1]", "expected a positive integer", "got 0"});
  expectError(R"({"name": "m", "parameters": [{"name": "b", "shape": [3, -2]}]})",
              StatusCode::kInvalidArgument,
              {"parameters[0].shape[1]", "expected a positive integer", "got -2"});
  expectError(R"({"name": "m", "parameters": [{"name": "b", "shape": [2.5]}]})",
              StatusCode::kInvalidArgument,
              {"parameters[0].shape[0]", "expected a positive integer", "got 2.5"});
  expectError(R"({"name": "m", "parameters": [{"name": "b"}]})", StatusCode::kInvalidArgument,
              {"parameters[0].shape", "expected an array of positive integers"});
  expectError(R"({"name": "m", "parameters": [{"name": "b", "shape": [4294967296, 4294967296]}]})",
              StatusCode::kInvalidArgument, {"parameters[0].shape", "fits in int64"});
}

TEST(ModelLoaderTest, RejectsLayerReferencingUnknownParameter) {
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "params": ["fc1.weight", "fc1.bais"]}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].params[1]", "expected the name of a parameter", "\"fc1.bais\""});
}

TEST(ModelLoaderTest, RejectsReadyOrderNamingParameterTheLayerDoesNotOwn) {
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "params": ["fc1.weight", "fc1.bias"],
                                   "grad_ready_order": ["fc1.bias", "fc2.weight"]}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].grad_ready_order[1]", "expected one of the layer's own params",
               "fc1.weight, fc1.bias", "\"fc2.weight\""});
}

TEST(ModelLoaderTest, RejectsReadyOrderThatIsNotAPermutation) {
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "params": ["fc1.weight", "fc1.bias"],
                                   "grad_ready_order": ["fc1.bias"]}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].grad_ready_order:", "expected a permutation of the layer's params"});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "params": ["fc1.weight", "fc1.bias"],
                                   "grad_ready_order": ["fc1.bias", "fc1.bias"]}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].grad_ready_order[1]", "expected a permutation"});
}

TEST(ModelLoaderTest, RejectsBadPolynomialMonomial) {
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "flops": {"batch*tokens": 2}}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].flops[\"batch*tokens\"]", "expected a monomial", "batch, seq, image"});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "bytes": {"batch": "many"}}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].bytes[\"batch\"]", "expected a finite number"});
}

TEST(ModelLoaderTest, RejectsBadUsePattern) {
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear", "use": {"period": 0}}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].use.period", "expected an integer >= 1", "got 0"});
  expectError(
      modelWithLayers(R"([{"name": "fc1", "type": "Linear", "use": {"period": 3, "phase": 3}}])"),
      StatusCode::kInvalidArgument,
      {"layers[0].use.phase", "expected an integer in [0, 3)", "got 3"});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear", "use": {"ranks": [0, -1]}}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].use.ranks[1]", "non-negative integer rank"});
}

TEST(ModelLoaderTest, RejectsOtherLayerMistakes) {
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear"},
                                  {"name": "fc1", "type": "Linear"}])"),
              StatusCode::kInvalidArgument,
              {"layers[1].name", "expected a unique layer name", "layers[0]"});
  expectError(modelWithLayers(R"([{"name": "fc1"}])"), StatusCode::kInvalidArgument,
              {"layers[0].type", "expected a non-empty string"});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear", "inputs": ["fc2"]},
                                  {"name": "fc2", "type": "Linear"}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].inputs[0]", "the name of an earlier layer", "\"fc2\""});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "params": ["fc1.weight", "fc1.weight"]}])"),
              StatusCode::kInvalidArgument, {"layers[0].params[1]", "at most once"});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear", "attrs": {"k": "x"}}])"),
              StatusCode::kInvalidArgument, {"layers[0].attrs[\"k\"]", "expected a number"});
  expectError(modelWithLayers(R"({"fc1": {}})"), StatusCode::kInvalidArgument,
              {"layers: expected an array of layer objects"});
}

TEST(ModelLoaderTest, ReadsHostOpsWithRuntimeCallsAndRejectsBadOnes) {
  StatusOr<ModelSpec> spec = parseModelJson(
      modelWithLayers(R"([{"name": "fc1", "type": "Linear", "host_ops": {"forward": 2,
                          "backward": 5, "forward_launches": 3.5, "backward_launches": 0}},
                          {"name": "fc2", "type": "Linear", "host_ops": {"forward": 1}}])"),
      "inline");
  ASSERT_TRUE(spec.isOk()) << spec.status().message();
  EXPECT_EQ(spec->layers[0].forwardOps, 2);
  EXPECT_EQ(spec->layers[0].backwardOps, 5);
  EXPECT_DOUBLE_EQ(spec->layers[0].forwardLaunches, 3.5);
  EXPECT_DOUBLE_EQ(spec->layers[0].backwardLaunches, 0);
  EXPECT_DOUBLE_EQ(spec->layers[1].forwardLaunches, -1);  // the type's default
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "host_ops": {"forward_launches": -1}}])"),
              StatusCode::kInvalidArgument,
              {"layers[0].host_ops.forward_launches", "runtime calls in [0, 100000]"});
  expectError(modelWithLayers(R"([{"name": "fc1", "type": "Linear",
                                   "host_ops": {"launches": 1}}])"),
              StatusCode::kInvalidArgument, {"layers[0].host_ops", "launches"});
}

TEST(ModelLoaderTest, RejectsBadInputsAndBuffers) {
  expectError(
      R"({"name": "m", "inputs": {"batch": -1}, "parameters": [{"name": "w", "shape": [1]}]})",
      StatusCode::kInvalidArgument, {"inputs.batch", "expected a non-negative integer"});
  expectError(R"({"name": "m", "parameters": [{"name": "w", "shape": [1]}],
                  "buffers": [{"name": "b", "shape": [2], "dtype": "long"}]})",
              StatusCode::kInvalidArgument, {"buffers[0].dtype", "expected one of float32"});
  expectError(R"({"name": "m", "parameters": [{"name": "w", "shape": [1]}],
                  "buffers": [{"name": "b", "shape": [-1]}]})",
              StatusCode::kInvalidArgument,
              {"buffers[0].shape[0]", "expected a non-negative integer"});
}

}  // namespace
}  // namespace ddpscope::models
