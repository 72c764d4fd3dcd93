// The model op's case: presets, sizes read from a checkpoint, the prompt's forms, and every
// way a checkpoint can be wrong refused at load time (what --dry-run runs) naming the tensor.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "app/case.hpp"
#include "app/errors.hpp"
#include "app/tokenizer.hpp"

namespace attnbench {
namespace {

namespace fs = std::filesystem;

struct Sizes {
  int64_t layers = 2, d = 16, vocab = 11, positions = 40;
};

// A GPT-2 checkpoint's header in Hugging Face's names and orientations, F32 zeros behind it.
// `edit` may change the header (by tensor name) before it is written.
std::string write_checkpoint(const std::string& name, Sizes s,
                             const std::function<void(nlohmann::json&)>& edit = nullptr, const std::string& prefix = "",
                             int64_t cut_bytes = 0) {
  nlohmann::json h = nlohmann::json::object();
  uint64_t at = 0;
  const auto add = [&](const std::string& n, std::vector<int64_t> shape) {
    uint64_t count = 1;
    for (int64_t v : shape) count *= static_cast<uint64_t>(v);
    h[prefix + n] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {at, at + 4 * count}}};
    at += 4 * count;
  };
  add("wte.weight", {s.vocab, s.d});
  add("wpe.weight", {s.positions, s.d});
  for (int64_t l = 0; l < s.layers; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    add(p + "ln_1.weight", {s.d});
    add(p + "ln_1.bias", {s.d});
    add(p + "attn.bias", {1, 1, s.positions, s.positions});  // the causal-mask buffer: ignored
    add(p + "attn.c_attn.weight", {s.d, 3 * s.d});
    add(p + "attn.c_attn.bias", {3 * s.d});
    add(p + "attn.c_proj.weight", {s.d, s.d});
    add(p + "attn.c_proj.bias", {s.d});
    add(p + "ln_2.weight", {s.d});
    add(p + "ln_2.bias", {s.d});
    add(p + "mlp.c_fc.weight", {s.d, 4 * s.d});
    add(p + "mlp.c_fc.bias", {4 * s.d});
    add(p + "mlp.c_proj.weight", {4 * s.d, s.d});
    add(p + "mlp.c_proj.bias", {s.d});
  }
  add("ln_f.weight", {s.d});
  add("ln_f.bias", {s.d});
  if (edit) edit(h);
  const std::string header = h.dump();
  const std::string path = (fs::temp_directory_path() / ("attnbench_model_" + name + ".safetensors")).string();
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(n >> (8 * i) & 0xff));
  out << header;
  out << std::string(static_cast<size_t>(static_cast<int64_t>(at) - cut_bytes), '\0');
  return path;
}

Case load(const std::string& toml) { return parse_case(toml, "cases/model.toml", {}); }

std::string error_of(const std::string& toml) {
  try {
    load(toml);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string with_weights(const std::string& path, const std::string& shape = "heads = 2") {
  return "op = \"model\"\nweights = \"" + path + "\"\n[shape]\nbatch = 1\n" + shape + "\n";
}

TEST(ModelCase, PresetSizesAndOverrides) {
  const Case c = load("op = \"model\"\n[shape]\npreset = \"gpt2\"\nlayers = 2\nbatch = 1\n");
  const Shape& s = c.points.at(0).shape;
  EXPECT_EQ(s.num("layers"), 2);  // given: overrides the preset
  EXPECT_EQ(s.num("d_model"), 768);
  EXPECT_EQ(s.num("heads"), 12);
  EXPECT_EQ(s.num("vocab"), 50257);
  EXPECT_EQ(s.num("max_positions"), 1024);
  EXPECT_EQ(s.num("prompt_len"), 16);
  EXPECT_EQ(s.word("gemm"), "cublas");
}

TEST(ModelCase, CustomNeedsEverySize) {
  EXPECT_NE(error_of("op = \"model\"\n[shape]\nbatch = 1\nd_model = 64\nheads = 2\nvocab = 9\nmax_positions = 9\n")
                .find("shape.layers is needed"),
            std::string::npos);
  EXPECT_NE(error_of("op = \"model\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\nheads = 7\n").find("whole head_dim"),
            std::string::npos);
}

TEST(ModelCase, PromptIdsSetItsLength) {
  const Case c =
      load("op = \"model\"\n[shape]\npreset = \"gpt2\"\nbatch = 2\nprompt = [464, 2068, 7586]\ngenerate = 4\n");
  EXPECT_EQ(c.points.at(0).shape.num("prompt_len"), 3);
  EXPECT_NE(error_of("op = \"model\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\nprompt = [1, 50257]\n")
                .find("prompt token 50257 is outside the vocabulary of 50257"),
            std::string::npos);
  EXPECT_NE(error_of("op = \"model\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\nprompt = [1, 2]\nprompt_len = 3\n")
                .find("is not the prompt's 2 tokens"),
            std::string::npos);
  EXPECT_NE(error_of("op = \"model\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\nprompt_len = 1000\ngenerate = 26\n")
                .find("passes max_positions (1024)"),
            std::string::npos);
  EXPECT_NE(error_of("op = \"model\"\nprompt_text = \"Hello\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\n")
                .find("prompt_text needs tokenizer_vocab and tokenizer_merges"),
            std::string::npos);
}

// GPT-2's byte alphabet as a vocabulary, byte b with id b, and merges.txt with no merge: text
// encodes byte by byte.
std::string byte_tokenizer(const std::string& dir) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = gpt2_char_of_byte(static_cast<uint8_t>(b));  // below U+0800: one or two UTF-8 bytes
    const std::string token =
        cp < 0x80 ? std::string(1, static_cast<char>(cp))
                  : std::string{static_cast<char>(0xc0 | (cp >> 6)), static_cast<char>(0x80 | (cp & 0x3f))};
    vocab[token] = b;
  }
  fs::create_directories(dir);
  std::ofstream(dir + "/vocab.json") << vocab.dump();
  std::ofstream(dir + "/merges.txt") << "#version: 0.2\n";
  return dir;
}

TEST(ModelCase, PromptTextIsEncodedAtLoad) {
  const std::string dir = byte_tokenizer((fs::temp_directory_path() / "attnbench_model_tokenizer").string());
  const std::string top =
      "op = \"model\"\ntokenizer_vocab = \"" + dir + "/vocab.json\"\ntokenizer_merges = \"" + dir + "/merges.txt\"\n";
  const Case c = load(top + "prompt_text = \"Hi!\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\n");
  EXPECT_EQ(c.points.at(0).shape.lengths("prompt"), (std::vector<int64_t>{'H', 'i', '!'}));
  EXPECT_EQ(c.points.at(0).shape.num("prompt_len"), 3);
  EXPECT_NE(error_of(top + "prompt_text = \"Hi\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\nprompt = [1]\n")
                .find("give prompt or prompt_text, not both"),
            std::string::npos);
  const std::string missing =
      "op = \"model\"\ntokenizer_vocab = \"" + dir + "/none.json\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\n";
  EXPECT_NE(error_of(missing).find("none.json"), std::string::npos);
}

TEST(ModelCase, TopLevelKeysStayAtTheTop) {
  EXPECT_NE(error_of("op = \"model\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\nweights = \"x\"\n")
                .find("unknown key shape.weights"),
            std::string::npos);
  EXPECT_NE(error_of("op = \"softmax\"\nweights = \"x\"\n[shape]\nrows = 1\ncols = 1\n").find("unknown key weights"),
            std::string::npos);
}

TEST(ModelCase, SizesReadFromTheCheckpoint) {
  const std::string path = write_checkpoint("sizes", {});
  const Case c = load(with_weights(path));
  const Shape& s = c.points.at(0).shape;
  EXPECT_EQ(s.num("layers"), 2);
  EXPECT_EQ(s.num("d_model"), 16);
  EXPECT_EQ(s.num("vocab"), 11);
  EXPECT_EQ(s.num("max_positions"), 40);
  EXPECT_EQ(s.word("weights"), path);
  // GPT2LMHeadModel's names, under "transformer."
  EXPECT_EQ(
      load(with_weights(write_checkpoint("prefixed", {}, nullptr, "transformer."))).points.at(0).shape.num("layers"),
      2);
}

TEST(ModelCase, RelativeWeightsAreTakenFromTheCaseFolder) {
  const std::string err =
      error_of("op = \"model\"\nweights = \"w/model.safetensors\"\n[shape]\npreset = \"gpt2\"\nbatch = 1\n");
  EXPECT_NE(err.find("cases/w/model.safetensors"), std::string::npos) << err;
}

TEST(ModelCase, BadCheckpointsNameTheTensor) {
  const Sizes s;
  const auto err = [&](const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                       const std::string& shape = "heads = 2", int64_t cut = 0) {
    return error_of(with_weights(write_checkpoint(name, s, edit, "", cut), shape));
  };
  EXPECT_NE(err("missing",
                [](nlohmann::json& h) {
                  h["h.1.mlp.c_fc.b"] = h["h.1.mlp.c_fc.bias"];  // its bytes stay, under another name
                  h.erase("h.1.mlp.c_fc.bias");
                })
                .find("h.1.mlp.c_fc.bias"),
            std::string::npos);
  // A Conv1D weight in nn.Linear's orientation is the wrong shape.
  std::string e = err("orientation", [](nlohmann::json& h) { h["h.0.attn.c_attn.weight"]["shape"] = {48, 16}; });
  EXPECT_NE(e.find("h.0.attn.c_attn.weight"), std::string::npos) << e;
  e = err("dtype", [](nlohmann::json& h) {
    auto& t = h["ln_f.bias"];
    t["dtype"] = "I32";
  });
  EXPECT_NE(e.find("ln_f.bias"), std::string::npos) << e;
  e = err("truncated", nullptr, "heads = 2", 4);
  EXPECT_NE(e.find("attnbench_model_truncated"), std::string::npos) << e;
  // The case's sizes against the checkpoint's.
  e = err("width", nullptr, "heads = 2\nd_model = 32");
  EXPECT_NE(e.find("wte.weight"), std::string::npos) << e;
  e = error_of(with_weights((fs::temp_directory_path() / "attnbench_model_absent.safetensors").string()));
  EXPECT_NE(e.find("attnbench_model_absent.safetensors"), std::string::npos) << e;
  EXPECT_NE(error_of(with_weights(write_checkpoint("noheads", s), "")).find("shape.heads is needed"),
            std::string::npos);
}

}  // namespace
}  // namespace attnbench
