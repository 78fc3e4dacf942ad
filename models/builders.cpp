#include "models/builders.h"

#include <algorithm>
#include <map>
#include <string>
#include <utility>

#include "base/strings.h"

namespace ddpscope::models {

namespace {

constexpr double kFp32Bytes = 4;

CostPoly::Term term(double coef, int b, int s, int i) {
  return CostPoly::Term{coef, b, s, i};
}

// Builds a spec the way gen_zoo.py's Model class does.
class SpecBuilder {
 public:
  SpecBuilder(std::string name, std::string description, ModelInputs inputs) {
    m_spec.name = std::move(name);
    m_spec.origin = "builder:" + m_spec.name;
    m_spec.description = std::move(description);
    m_spec.defaultInputs = inputs;
  }

  int param(const std::string& name, std::vector<int64_t> shape) {
    m_spec.params.push_back(ParamSpec{.name = name, .shape = std::move(shape)});
    return static_cast<int>(m_spec.params.size()) - 1;
  }
  void buffer(const std::string& name, std::vector<int64_t> shape, DType dtype) {
    m_spec.buffers.push_back(BufferSpec{.name = name, .shape = std::move(shape), .dtype = dtype});
  }
  double paramBytes(const std::vector<int>& params) const {
    double total = 0;
    for (int p : params)
      total += static_cast<double>(m_spec.params[static_cast<size_t>(p)].numel());
    return total * kFp32Bytes;
  }

  // `inputs` empty = the previous layer; stored like the zoo (omitted when it is the default).
  LayerSpec& layer(const std::string& name, const std::string& type, std::vector<int> params,
                   std::vector<int> ready, CostPoly flops, CostPoly bytes,
                   std::map<std::string, double> attrs, std::vector<std::string> inputs = {}) {
    LayerSpec layer;
    layer.name = name;
    layer.type = type;
    layer.params = std::move(params);
    layer.gradReadyOrder = std::move(ready);
    layer.forwardFlops = std::move(flops);
    layer.forwardBytes = std::move(bytes);
    layer.attrs = std::move(attrs);
    std::vector<std::string> defaultInputs{m_last.empty() ? std::string(kModelInputName) : m_last};
    if (!inputs.empty() && inputs != defaultInputs) layer.inputs = std::move(inputs);
    m_spec.layers.push_back(std::move(layer));
    m_last = name;
    return m_spec.layers.back();
  }
  const std::string& last() const { return m_last; }
  ModelSpec take() { return std::move(m_spec); }

 private:
  ModelSpec m_spec;
  std::string m_last;
};

// Polynomials with one monomial plus an optional constant.
CostPoly poly(double coef, int b, int s, int i, double constant = 0) {
  CostPoly p;
  if (coef != 0) p.terms.push_back(term(coef, b, s, i));
  if (constant != 0) p.terms.push_back(term(constant, 0, 0, 0));
  return p;
}

// ---- GPT-2 (gen_zoo.py: Transformer + gpt2()) ----------------------------------------------

class Gpt2Builder {
 public:
  explicit Gpt2Builder(SpecBuilder& b) : m_b(b) {}
  // per-token cost → batch*seq monomial
  static CostPoly tok(double perToken, double constant = 0) {
    return poly(perToken, 1, 1, 0, constant);
  }

  std::string linear(const std::string& name, int64_t fin, int64_t fout) {
    int w = m_b.param(name + ".weight", {fin, fout});  // HF Conv1D: [in, out]
    int bias = m_b.param(name + ".bias", {fout});
    std::vector<int> params{w, bias};
    const double f = static_cast<double>(fin), o = static_cast<double>(fout);
    m_b.layer(name, "Conv1D", params, {bias, w}, tok(2 * f * o + o),
              tok((f + o) * kFp32Bytes, m_b.paramBytes(params)),
              {{"in_features", f}, {"out_features", o}, {"bias", 1}});
    return name;
  }
  std::string layernorm(const std::string& name, int64_t width, double eps) {
    int w = m_b.param(name + ".weight", {width});
    int bias = m_b.param(name + ".bias", {width});
    std::vector<int> params{w, bias};
    const double h = static_cast<double>(width);
    m_b.layer(name, "LayerNorm", params, params, tok(5 * h),
              tok(2 * h * kFp32Bytes, m_b.paramBytes(params)),
              {{"normalized_shape", h}, {"eps", eps}});
    return name;
  }
  std::string elementwise(const std::string& name, const std::string& type, int64_t width,
                          double flopsPerElem, double tensors, std::map<std::string, double> attrs,
                          std::vector<std::string> inputs = {}) {
    const double h = static_cast<double>(width);
    m_b.layer(name, type, {}, {}, tok(flopsPerElem * h), tok(tensors * h * kFp32Bytes),
              std::move(attrs), std::move(inputs));
    return name;
  }
  std::string embedding(const std::string& name, int64_t num, int64_t dim) {
    int w = m_b.param(name + ".weight", {num, dim});
    m_b.layer(
        name, "Embedding", {w}, {w}, CostPoly{}, tok(2 * static_cast<double>(dim) * kFp32Bytes),
        {{"num_embeddings", static_cast<double>(num)}, {"embedding_dim", static_cast<double>(dim)}},
        {std::string(kModelInputName)});
    return name;
  }
  std::string attention(const std::string& name, int64_t width, int64_t heads, double p) {
    const double h = static_cast<double>(width), nh = static_cast<double>(heads);
    CostPoly flops = poly(4 * h + 8 * nh, 1, 2, 0);
    CostPoly bytes;
    bytes.terms.push_back(term(nh * 4 * kFp32Bytes, 1, 2, 0));
    bytes.terms.push_back(term(4 * h * kFp32Bytes, 1, 1, 0));
    m_b.layer(name, "AttentionCore", {}, {}, flops, bytes,
              {{"num_heads", nh},
               {"head_dim", static_cast<double>(width / heads)},
               {"causal", 1},
               {"dropout", p}});
    return name;
  }

 private:
  SpecBuilder& m_b;
};

// ---- MLP (gen_zoo.py: Cnn with spatial = False) -----------------------------------------------

void mlpLinear(SpecBuilder& b, const std::string& name, int64_t fin, int64_t fout, bool first) {
  int w = b.param(name + ".weight", {fout, fin});
  int bias = b.param(name + ".bias", {fout});
  std::vector<int> params{w, bias};
  const double f = static_cast<double>(fin), o = static_cast<double>(fout);
  const double fl = 2 * f * o + o;
  LayerSpec& layer = b.layer(name, "Linear", params, {bias, w}, poly(fl, 1, 0, 0),
                             poly((f + o) * kFp32Bytes, 1, 0, 0, b.paramBytes(params)),
                             {{"in_features", f}, {"out_features", o}, {"bias", 1}});
  if (first) layer.backwardFlops = poly(fl, 1, 0, 0);
}

void mlpRelu(SpecBuilder& b, const std::string& name, int64_t width) {
  const double n = static_cast<double>(width);
  b.layer(name, "ReLU", {}, {}, poly(n, 1, 0, 0), poly(2 * n * kFp32Bytes, 1, 0, 0),
          {{"inplace", 1}});
}

// ---- shorthand ---------------------------------------------------------------------------------

struct ShorthandArgs {
  std::string kind;
  std::map<std::string, std::string> values;
};

Status parseArgs(std::string_view text, ShorthandArgs* out) {
  std::string_view body = trimString(text);
  size_t colon = body.find(':');
  out->kind = std::string(trimString(body.substr(0, colon)));
  if (colon == std::string_view::npos) return Status::ok();
  std::string_view rest = body.substr(colon + 1);
  if (trimString(rest).empty()) return Status::ok();
  for (const std::string& item : splitString(rest, ',')) {
    std::string_view kv = trimString(item);
    size_t eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return invalidArgument("model shorthand '" + std::string(text) +
                             "': expected key=value; got '" + std::string(kv) + "'");
    }
    std::string key(trimString(kv.substr(0, eq)));
    if (out->values.count(key) != 0) {
      return invalidArgument("model shorthand '" + std::string(text) + "': key '" + key +
                             "' given twice");
    }
    out->values[key] = std::string(trimString(kv.substr(eq + 1)));
  }
  return Status::ok();
}

// Consumes integer keys; reports unknown keys and bad values.
class KeyReader {
 public:
  KeyReader(std::string_view text, ShorthandArgs& args, std::vector<std::string> allowed)
      : m_text(text), m_args(args), m_allowed(std::move(allowed)) {}

  // Sizes are bounded so that a product of three (batch * seq * embd, a weight's bytes) fits in
  // int64, and layer counts (a real GPT has at most ~128) so that building the spec stays quick:
  // 2180 GPT-2 blocks took over 1 s under ASan.
  static constexpr int64_t kMaxSize = int64_t{1} << 20;
  static constexpr int64_t kMaxLayers = 1024;

  Status readInt(const std::string& key, int64_t* target, int64_t minValue = 1,
                 int64_t maxValue = kMaxSize) {
    auto it = m_args.values.find(key);
    if (it == m_args.values.end()) return Status::ok();
    std::optional<int64_t> value = parseInt64(it->second);
    if (!value || *value < minValue) {
      return invalidArgument("model shorthand '" + std::string(m_text) + "': " + key +
                             ": expected an integer >= " + std::to_string(minValue) + "; got '" +
                             it->second + "'");
    }
    if (*value > maxValue) {
      return invalidArgument("model shorthand '" + std::string(m_text) + "': " + key +
                             ": expected an integer <= " + std::to_string(maxValue) + "; got '" +
                             it->second + "'");
    }
    *target = *value;
    return Status::ok();
  }
  std::optional<std::string> raw(const std::string& key) const {
    auto it = m_args.values.find(key);
    if (it == m_args.values.end()) return std::nullopt;
    return it->second;
  }
  Status checkUnknown() const {
    for (const auto& [key, value] : m_args.values) {
      if (std::find(m_allowed.begin(), m_allowed.end(), key) == m_allowed.end()) {
        std::string list;
        for (const std::string& a : m_allowed) list += (list.empty() ? "" : ", ") + a;
        return invalidArgument("model shorthand '" + std::string(m_text) + "': unknown key '" +
                               key + "' for " + m_args.kind + " (allowed: " + list + ")");
      }
    }
    return Status::ok();
  }
  Status fail(const std::string& message) const {
    return invalidArgument("model shorthand '" + std::string(m_text) + "': " + message);
  }

 private:
  std::string_view m_text;
  ShorthandArgs& m_args;
  std::vector<std::string> m_allowed;
};

constexpr std::string_view kKinds = "gpt2, mlp, mlp-branch";

}  // namespace

ModelSpec makeGpt2Spec(const Gpt2Config& c) {
  const double eps = 1e-05, pdrop = 0.1;
  SpecBuilder b(c.name,
                "Hugging Face GPT2Model (" + std::to_string(c.nLayer) + " layers, n_embd " +
                    std::to_string(c.nEmbd) + ", " + std::to_string(c.nHead) + " heads, vocab " +
                    std::to_string(c.vocab) + "), no lm_head",
                ModelInputs{.batch = c.batch, .seqLen = c.seqLen});
  Gpt2Builder g(b);
  const int64_t h = c.nEmbd;
  std::string wte = g.embedding("wte", c.vocab, h);
  std::string wpe = g.embedding("wpe", c.nPositions, h);
  g.elementwise("add", "Add", h, 1, 3, {}, {wte, wpe});
  g.elementwise("drop", "Dropout", h, 2, 3, {{"p", pdrop}});
  for (int64_t i = 0; i < c.nLayer; ++i) {
    const std::string p = "h." + std::to_string(i);
    const std::string blockIn = b.last();
    g.layernorm(p + ".ln_1", h, eps);
    b.buffer(p + ".attn.bias", {1, 1, c.nPositions, c.nPositions}, DType::kBool);
    b.buffer(p + ".attn.masked_bias", {}, DType::kFloat32);
    g.linear(p + ".attn.c_attn", h, 3 * h);
    g.attention(p + ".attn.core", h, c.nHead, pdrop);
    g.linear(p + ".attn.c_proj", h, h);
    g.elementwise(p + ".attn.resid_dropout", "Dropout", h, 2, 3, {{"p", pdrop}});
    std::string x = g.elementwise(p + ".add", "Add", h, 1, 3, {}, {b.last(), blockIn});
    g.layernorm(p + ".ln_2", h, eps);
    g.linear(p + ".mlp.c_fc", h, 4 * h);
    g.elementwise(p + ".mlp.act", "GELU", 4 * h, 8, 2, {{"approximate_tanh", 1}});
    g.linear(p + ".mlp.c_proj", 4 * h, h);
    g.elementwise(p + ".mlp.dropout", "Dropout", h, 2, 3, {{"p", pdrop}});
    g.elementwise(p + ".add:2", "Add", h, 1, 3, {}, {x, b.last()});
  }
  g.layernorm("ln_f", h, eps);
  return b.take();
}

ModelSpec makeMlpSpec(const MlpConfig& c) {
  SpecBuilder b(c.name,
                "nn.Sequential of " + std::to_string(c.depth) + " Linear layers (" +
                    std::to_string(c.in) + " -> " + std::to_string(c.hidden) + " -> " +
                    std::to_string(c.out) + ") with ReLU between",
                ModelInputs{.batch = c.batch});
  std::vector<int64_t> widths{c.in};
  for (int64_t i = 1; i < c.depth; ++i) widths.push_back(c.hidden);
  widths.push_back(c.out);
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    mlpLinear(b, std::to_string(2 * i), widths[i], widths[i + 1], i == 0);
    if (i + 2 < widths.size()) mlpRelu(b, std::to_string(2 * i + 1), widths[i + 1]);
  }
  return b.take();
}

ModelSpec makeBranchyMlpSpec(const BranchyMlpConfig& c) {
  SpecBuilder b(c.name,
                "fc1 -> relu -> (relu + branch(relu), branch used per its use pattern) -> fc2",
                ModelInputs{.batch = c.batch});
  // Register fc1, branch, fc2 (module order), then lay the layers out in execution order.
  int w1 = b.param("fc1.weight", {c.hidden, c.in}), b1 = b.param("fc1.bias", {c.hidden});
  int wb = b.param("branch.weight", {c.hidden, c.hidden}), bb = b.param("branch.bias", {c.hidden});
  int w2 = b.param("fc2.weight", {c.out, c.hidden}), b2 = b.param("fc2.bias", {c.out});
  auto linear = [&](const std::string& name, int w, int bias, int64_t fin, int64_t fout,
                    std::vector<std::string> inputs) -> LayerSpec& {
    const double f = static_cast<double>(fin), o = static_cast<double>(fout);
    return b.layer(name, "Linear", {w, bias}, {bias, w}, poly(2 * f * o + o, 1, 0, 0),
                   poly((f + o) * kFp32Bytes, 1, 0, 0, b.paramBytes({w, bias})),
                   {{"in_features", f}, {"out_features", o}, {"bias", 1}}, std::move(inputs));
  };
  const double h = static_cast<double>(c.hidden);
  LayerSpec& fc1 = linear("fc1", w1, b1, c.in, c.hidden, {});
  fc1.backwardFlops = fc1.forwardFlops;
  b.layer("relu", "ReLU", {}, {}, poly(h, 1, 0, 0), poly(2 * h * kFp32Bytes, 1, 0, 0), {});
  LayerSpec& branch = linear("branch", wb, bb, c.hidden, c.hidden, {"relu"});
  branch.use = c.use;
  b.layer("add", "Add", {}, {}, poly(h, 1, 0, 0), poly(3 * h * kFp32Bytes, 1, 0, 0), {},
          {"relu", "branch"});
  linear("fc2", w2, b2, c.hidden, c.out, {});
  return b.take();
}

bool isModelShorthand(std::string_view text) {
  std::string_view body = trimString(text);
  std::string_view kind = body.substr(0, body.find(':'));
  return kind == "gpt2" || kind == "mlp" || kind == "mlp-branch";
}

StatusOr<ModelSpec> parseModelShorthand(std::string_view text) {
  ShorthandArgs args;
  RETURN_IF_ERROR(parseArgs(text, &args));
  const std::string name(trimString(text));
  if (args.kind == "gpt2") {
    KeyReader r(text, args, {"layers", "embd", "heads", "vocab", "seq", "positions", "batch"});
    RETURN_IF_ERROR(r.checkUnknown());
    Gpt2Config c;
    c.name = name;
    RETURN_IF_ERROR(r.readInt("layers", &c.nLayer, 0, KeyReader::kMaxLayers));
    RETURN_IF_ERROR(r.readInt("embd", &c.nEmbd));
    RETURN_IF_ERROR(r.readInt("heads", &c.nHead));
    RETURN_IF_ERROR(r.readInt("vocab", &c.vocab));
    RETURN_IF_ERROR(r.readInt("seq", &c.seqLen));
    c.nPositions = std::max<int64_t>(c.nPositions, c.seqLen);
    RETURN_IF_ERROR(r.readInt("positions", &c.nPositions));
    RETURN_IF_ERROR(r.readInt("batch", &c.batch));
    if (c.nEmbd % c.nHead != 0) {
      return r.fail("embd (" + std::to_string(c.nEmbd) + ") must be a multiple of heads (" +
                    std::to_string(c.nHead) + ")");
    }
    if (c.seqLen > c.nPositions) {
      return r.fail("seq (" + std::to_string(c.seqLen) + ") exceeds positions (" +
                    std::to_string(c.nPositions) + ")");
    }
    return makeGpt2Spec(c);
  }
  if (args.kind == "mlp") {
    KeyReader r(text, args, {"in", "hidden", "depth", "out", "batch"});
    RETURN_IF_ERROR(r.checkUnknown());
    MlpConfig c;
    c.name = name;
    RETURN_IF_ERROR(r.readInt("in", &c.in));
    RETURN_IF_ERROR(r.readInt("hidden", &c.hidden));
    RETURN_IF_ERROR(r.readInt("depth", &c.depth, 1, KeyReader::kMaxLayers));
    RETURN_IF_ERROR(r.readInt("out", &c.out));
    RETURN_IF_ERROR(r.readInt("batch", &c.batch));
    return makeMlpSpec(c);
  }
  if (args.kind == "mlp-branch") {
    KeyReader r(text, args, {"in", "hidden", "out", "period", "phase", "ranks", "batch"});
    RETURN_IF_ERROR(r.checkUnknown());
    BranchyMlpConfig c;
    c.name = name;
    RETURN_IF_ERROR(r.readInt("in", &c.in));
    RETURN_IF_ERROR(r.readInt("hidden", &c.hidden));
    RETURN_IF_ERROR(r.readInt("out", &c.out));
    RETURN_IF_ERROR(r.readInt("period", &c.use.period));
    RETURN_IF_ERROR(r.readInt("phase", &c.use.phase, 0));
    RETURN_IF_ERROR(r.readInt("batch", &c.batch));
    if (c.use.phase >= c.use.period) {
      return r.fail("phase (" + std::to_string(c.use.phase) + ") must be < period (" +
                    std::to_string(c.use.period) + ")");
    }
    if (std::optional<std::string> ranks = r.raw("ranks")) {
      for (const std::string& item : splitString(*ranks, '+')) {
        std::optional<int64_t> rank = parseInt64(trimString(item));
        if (!rank || *rank < 0 || *rank > 1 << 20) {
          return r.fail("ranks: expected non-negative integers joined by '+' (e.g. 0+2); got '" +
                        *ranks + "'");
        }
        c.use.ranks.push_back(static_cast<int>(*rank));
      }
    }
    return makeBranchyMlpSpec(c);
  }
  return invalidArgument("model shorthand '" + std::string(text) + "': unknown kind '" + args.kind +
                         "' (known: " + std::string(kKinds) + ")");
}

}  // namespace ddpscope::models
