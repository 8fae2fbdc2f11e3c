// Hugging Face export and import (core/interop): the exported tensors, read back by their
// Transformers names into an independent Mixtral forward (tests/support/mixtral_reference.h),
// give mok's logits; export → import gives bitwise the same parameters and logits; grouped
// key/value heads and Transformers 5's fused expert tensors import to the same function;
// models Mixtral cannot hold are refused before anything is written; BF16 export rounds.
#include <QtTest>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/config/config_io.h"
#include "core/data/byte_tokenizer.h"
#include "core/interop/hf_export.h"
#include "core/interop/hf_import.h"
#include "core/interop/interop_model.h"
#include "core/interop/mixtral_config.h"
#include "core/interop/mixtral_layout.h"
#include "core/train/checkpoint.h"
#include "core/train/safetensors.h"
#include "core/util/counter_rng.h"
#include "core/util/half_float.h"
#include "core/util/json_reader.h"
#include "support/mixtral_reference.h"

namespace fs = std::filesystem;
using namespace mok;

namespace {

ExperimentConfig small_config(bool tied) {
  ExperimentConfig c;
  c.name = "hf-small";
  c.seed = 11;
  c.data.tokenizer = "byte";
  c.data.seq_len = 24;
  c.model.layers = 2;
  c.model.d_model = 32;
  c.model.heads = 4;  // head width 8
  c.model.experts = 4;
  c.model.top_k = 2;
  c.model.expert_hidden = 16;
  c.model.tie_embeddings = tied;
  c.model.rope_theta = 500.0;  // turns fast enough that position errors show within 24 tokens
  c.model.norm_eps = 1e-5;
  c.model.init_std = 0.2;      // large weights: routing and attention far from uniform
  return c;
}

// A checkpoint of `c` whose every value (norm gains too) is random, in `dir`.
void write_random_checkpoint(const ExperimentConfig& c, const fs::path& dir) {
  auto model = make_interop_model(c, 256);
  CounterRng rng(c.seed, 99);
  for (Parameter* p : model->parameters()) {
    float* v = p->value.data();
    const bool gain = p->value.shape().size() == 1;
    for (int64_t i = 0; i < p->value.numel(); ++i) {
      const float noise = static_cast<float>((static_cast<double>(rng.next_u64() >> 11) * 0x1.0p-53 - 0.5) * 0.6);
      v[i] = gain ? 1.0f + noise : v[i] + 0.3f * noise;
    }
  }
  TrainerState st;
  st.total_steps = c.train.steps;
  st.run_name = c.name;
  st.seed = c.seed;
  save_checkpoint(dir.string(), model->parameters(), nullptr, st, experiment_config_to_yaml(c),
                  [](const std::string& tmp) { ByteTokenizer().save((fs::path(tmp) / CheckpointFiles::tokenizer).string()); });
}

HfTensorMap read_hf_tensors(const fs::path& file) {
  const SafeTensorsFile f = SafeTensorsFile::read(file.string());
  HfTensorMap out;
  for (const auto& [name, t] : f.tensors()) out[name] = HfTensor{t.shape, f.read_f32(name)};
  return out;
}

// Hyperparameters by their Transformers names, read from config.json directly.
test::MixtralHyper read_hyper(const fs::path& config_json) {
  std::ifstream in(config_json);
  std::stringstream ss;
  ss << in.rdbuf();
  const JsonValue j = parse_json(ss.str());
  test::MixtralHyper h;
  h.vocab = static_cast<int>(j.at("vocab_size").as_int64());
  h.hidden = static_cast<int>(j.at("hidden_size").as_int64());
  h.layers = static_cast<int>(j.at("num_hidden_layers").as_int64());
  h.heads = static_cast<int>(j.at("num_attention_heads").as_int64());
  h.kv_heads = static_cast<int>(j.at("num_key_value_heads").as_int64());
  h.experts = static_cast<int>(j.at("num_local_experts").as_int64());
  h.top_k = static_cast<int>(j.at("num_experts_per_tok").as_int64());
  h.ffn = static_cast<int>(j.at("intermediate_size").as_int64());
  h.eps = j.at("rms_norm_eps").as_double();
  h.theta = j.at("rope_theta").as_double();
  h.tied = j.at("tie_word_embeddings").as_bool();
  return h;
}

std::vector<int32_t> some_tokens(int n, uint64_t seed) {
  CounterRng rng(seed, 5);
  std::vector<int32_t> t(n);
  for (int32_t& x : t) x = static_cast<int32_t>(rng.next_u64() % 256);
  return t;
}

// max |a − b| / max |b|
double relative_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return diff / scale;
}

std::vector<float> mok_logits(const fs::path& checkpoint, const std::vector<int32_t>& tokens) {
  const ExperimentConfig c = parse_experiment_config(read_checkpoint_config(checkpoint.string()), "config.yaml");
  auto model = make_interop_model(c, 256);
  load_model_weights(checkpoint.string(), model->parameters());
  const Tensor l = model->logits(tokens.data(), 1, static_cast<int>(tokens.size()));
  return std::vector<float>(l.data(), l.data() + l.numel());
}

}  // namespace

class TestHfExport : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  fs::path root_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    root_ = tmp_.path().toStdString();
  }

  // The CPU-side proof of the layout: an independent Mixtral forward over the exported
  // tensors gives mok's logits.
  void exportedTensorsComputeMoksLogits_data() {
    QTest::addColumn<bool>("tied");
    QTest::newRow("tied embeddings") << true;
    QTest::newRow("own head") << false;
  }
  void exportedTensorsComputeMoksLogits() {
    QFETCH(bool, tied);
    const ExperimentConfig c = small_config(tied);
    const fs::path ckpt = root_ / (tied ? "ckpt-tied" : "ckpt-untied");
    const fs::path out = root_ / (tied ? "hf-tied" : "hf-untied");
    write_random_checkpoint(c, ckpt);
    const HfExportResult r = export_hugging_face(ckpt.string(), out.string());
    for (const char* f : {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                          "mok_tokenizer.txt", "mok_config.yaml", "mok_reference.json", "README.md"})
      QVERIFY2(fs::exists(out / f), f);
    QCOMPARE(r.architecture, std::string("MixtralForCausalLM"));

    const HfTensorMap t = read_hf_tensors(out / "model.safetensors");
    // 1 embedding + 1 final norm + per layer (2 norms + q, k, v, o + gate + 3 per expert) (+ head)
    const size_t expected = 2 + 2 * (2 + 4 + 1 + 3 * 4) + (tied ? 0 : 1);
    QCOMPARE(t.size(), expected);
    QCOMPARE(t.count("lm_head.weight"), size_t(tied ? 0 : 1));
    QVERIFY(t.at("model.layers.1.block_sparse_moe.experts.3.w1.weight").shape == (std::vector<int64_t>{16, 32}));
    QVERIFY(t.at("model.layers.1.block_sparse_moe.experts.3.w2.weight").shape == (std::vector<int64_t>{32, 16}));
    QVERIFY(t.at("model.layers.0.block_sparse_moe.gate.weight").shape == (std::vector<int64_t>{4, 32}));

    // Transformers' config classes type-check floats: an integer literal there is refused.
    {
      std::ifstream in(out / "config.json");
      const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      for (const char* key : {"\"router_jitter_noise\":0.0", "\"attention_dropout\":0.0"})
        QVERIFY2(text.find(key) != std::string::npos, key);
    }
    const test::MixtralReference ref(t, read_hyper(out / "config.json"));
    for (uint64_t seed : {1u, 2u}) {
      const std::vector<int32_t> tokens = some_tokens(c.data.seq_len, seed);
      const std::vector<double> want = ref.logits(std::vector<int>(tokens.begin(), tokens.end()));
      const double err = relative_error(mok_logits(ckpt, tokens), want);
      qInfo("max relative logit error vs the Mixtral reference: %.3g", err);
      QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    }
    // The same reference with the gate and up halves swapped is far off: the check can fail.
    HfTensorMap swapped = t;
    for (int l = 0; l < 2; ++l)
      for (int e = 0; e < 4; ++e) {
        const std::string p = "model.layers." + std::to_string(l) + ".block_sparse_moe.experts." + std::to_string(e) + ".";
        std::swap(swapped[p + "w1.weight"], swapped[p + "w3.weight"]);
      }
    const std::vector<int32_t> tokens = some_tokens(c.data.seq_len, 1);
    const double wrong = relative_error(mok_logits(ckpt, tokens),
                                        test::MixtralReference(swapped, read_hyper(out / "config.json"))
                                            .logits(std::vector<int>(tokens.begin(), tokens.end())));
    QVERIFY2(wrong > 1e-2, qPrintable(QString::number(wrong)));
  }

  void exportThenImportIsBitwiseTheSame() {
    const ExperimentConfig c = small_config(false);
    const fs::path ckpt = root_ / "ckpt-roundtrip", out = root_ / "hf-roundtrip", run = root_ / "imported";
    write_random_checkpoint(c, ckpt);
    export_hugging_face(ckpt.string(), out.string());
    HfImportOptions o;
    o.run_dir = run.string();
    const HfImportResult r = import_hugging_face(out.string(), o);
    QCOMPARE(r.checkpoint, (run / "step_000000").string());
    QCOMPARE(r.config.model, c.model);  // mok_config.yaml carried the rest of the experiment
    QCOMPARE(r.config.name, c.name);
    // Parameters: bitwise.
    auto a = make_interop_model(c, 256), b = make_interop_model(r.config, 256);
    load_model_weights(ckpt.string(), a->parameters());
    load_model_weights(r.checkpoint, b->parameters());
    const auto pa = a->parameters(), pb = b->parameters();
    QCOMPARE(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      QCOMPARE(pa[i]->name, pb[i]->name);
      QVERIFY2(std::memcmp(pa[i]->value.data(), pb[i]->value.data(), pa[i]->value.bytes()) == 0, pa[i]->name.c_str());
    }
    const std::vector<int32_t> tokens = some_tokens(c.data.seq_len, 3);
    QVERIFY(mok_logits(ckpt, tokens) == mok_logits(r.checkpoint, tokens));
    // A checkpoint to train from: step 0, the optimizer's zero moments, the tokenizer.
    const TrainerState st = read_trainer_state(r.checkpoint);
    QCOMPARE(st.step, int64_t(0));
    QVERIFY(fs::exists(fs::path(r.checkpoint) / "optimizer.safetensors"));
    QVERIFY(fs::exists(fs::path(r.checkpoint) / "tokenizer.txt"));
    verify_checkpoint(r.checkpoint);
  }

  // A folder from elsewhere: no mok_config.yaml, no mok_tokenizer.txt. The tokenizer comes
  // from tokenizer.json, the experiment from mok's defaults and config.json.
  void importWithoutMokFilesUsesTheHfFiles() {
    const ExperimentConfig c = small_config(true);
    const fs::path ckpt = root_ / "ckpt-plain", out = root_ / "plain-mixtral";
    write_random_checkpoint(c, ckpt);
    export_hugging_face(ckpt.string(), out.string());
    fs::remove(out / "mok_config.yaml");
    fs::remove(out / "mok_tokenizer.txt");
    HfImportOptions o;
    o.run_dir = (root_ / "plain-run").string();
    const HfImportResult r = import_hugging_face(out.string(), o);
    QCOMPARE(r.config.name, std::string("plain-mixtral"));
    QCOMPARE(r.config.data.seq_len, c.data.seq_len);  // max_position_embeddings
    QCOMPARE(r.config.data.tokenizer, std::string("byte"));
    QCOMPARE(r.config.model, c.model);
    QVERIFY(r.tokenizer_source.ends_with("tokenizer.json"));
    QVERIFY(!r.notes.empty());
    const std::vector<int32_t> tokens = some_tokens(c.data.seq_len, 5);
    QVERIFY(mok_logits(ckpt, tokens) == mok_logits(r.checkpoint, tokens));
    // Without any tokenizer mok cannot train the model: refused, nothing written.
    fs::remove(out / "tokenizer.json");
    o.run_dir = (root_ / "plain-run-2").string();
    QVERIFY_THROWS_EXCEPTION(HfImportRefused, import_hugging_face(out.string(), o));
    QVERIFY(!fs::exists(o.run_dir));
  }

  // A Mixtral with fewer key/value heads (GQA), its experts fused as Transformers 5 keeps them:
  // mok repeats the kv heads and computes what the reference computes.
  void groupedKvHeadsAndFusedExpertsImport() {
    const ExperimentConfig c = small_config(true);
    const fs::path ckpt = root_ / "ckpt-gqa", out = root_ / "hf-gqa";
    write_random_checkpoint(c, ckpt);
    export_hugging_face(ckpt.string(), out.string());
    HfTensorMap t = read_hf_tensors(out / "model.safetensors");
    const int d = 32, hd = 8, kv = 2, E = 4, f = 16;
    CounterRng rng(4, 4);
    for (int l = 0; l < 2; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      for (const char* w : {"self_attn.k_proj.weight", "self_attn.v_proj.weight"}) {
        HfTensor small{{kv * hd, d}, std::vector<float>(kv * hd * d)};
        for (float& x : small.values) x = static_cast<float>(counter_normal(4, l, rng.next_u64() % 100000) * 0.3);
        t[p + w] = small;
      }
      // Fused experts: gate_up_proj (E, 2f, d) = [w1; w3] per expert, down_proj (E, d, f).
      HfTensor gate_up{{E, 2 * f, d}, {}}, down{{E, d, f}, {}};
      for (int e = 0; e < E; ++e) {
        const std::string x = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
        for (const char* w : {"w1.weight", "w3.weight"})
          gate_up.values.insert(gate_up.values.end(), t[x + w].values.begin(), t[x + w].values.end());
        down.values.insert(down.values.end(), t[x + "w2.weight"].values.begin(), t[x + "w2.weight"].values.end());
        for (const char* w : {"w1.weight", "w2.weight", "w3.weight"}) t.erase(x + w);
      }
      t[p + "mlp.experts.gate_up_proj"] = gate_up;
      t[p + "mlp.experts.down_proj"] = down;
      t[p + "mlp.gate.weight"] = t[p + "block_sparse_moe.gate.weight"];
      t.erase(p + "block_sparse_moe.gate.weight");
    }
    const MixtralShape shape{256, d, 4, kv, 2, E, f, true};
    auto model = make_interop_model(c, 256);
    parameters_from_mixtral_tensors(t, shape, model->parameters());
    // The reference reads the per-expert names; mok read the fused ones.
    const HfTensorMap unfused = unfuse_mixtral_experts(t, shape);
    test::MixtralHyper h = read_hyper(out / "config.json");
    h.kv_heads = kv;
    const std::vector<int32_t> tokens = some_tokens(c.data.seq_len, 9);
    const Tensor l = model->logits(tokens.data(), 1, static_cast<int>(tokens.size()));
    const double err = relative_error(std::vector<float>(l.data(), l.data() + l.numel()),
                                      test::MixtralReference(unfused, h).logits(std::vector<int>(tokens.begin(), tokens.end())));
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
    // A tensor the model has no place for is an error, not silently dropped.
    t["model.layers.0.mlp.shared_expert.up_proj.weight"] = HfTensor{{f, d}, std::vector<float>(f * d)};
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parameters_from_mixtral_tensors(t, shape, model->parameters()));
  }

  void unrepresentableModelsAreRefused_data() {
    QTest::addColumn<QString>("key");
    QTest::addColumn<QString>("value");
    QTest::addColumn<QString>("needle");
    QTest::newRow("shared expert") << "model.shared_expert" << "true" << "shared expert";
    QTest::newRow("dense layers") << "model.moe_layers" << "every_2" << "layer(s) 0";
    QTest::newRow("no experts") << "model.experts" << "0" << "dense MLP";
  }
  void unrepresentableModelsAreRefused() {
    QFETCH(QString, key);
    QFETCH(QString, value);
    QFETCH(QString, needle);
    ExperimentConfig c = small_config(true);
    apply_override(c, key.toStdString() + "=" + value.toStdString());
    const fs::path ckpt = root_ / ("ckpt-refused-" + key.toStdString()), out = root_ / ("hf-refused-" + key.toStdString());
    write_random_checkpoint(c, ckpt);
    try {
      export_hugging_face(ckpt.string(), out.string());
      QFAIL("export did not refuse");
    } catch (const HfExportRefused& e) {
      QVERIFY2(QString(e.what()).contains(needle), e.what());
    }
    QVERIFY(!fs::exists(out));  // nothing written
  }

  // Training-only settings are noted, not refused; capacity does not change the export.
  void trainingSettingsAreNotedNotRefused() {
    ExperimentConfig c = small_config(true);
    c.routing.capacity_factor = 0.5;  // would drop pairs in evaluate(); the export is dropless
    c.kittens.mode = "kitten";
    const fs::path ckpt = root_ / "ckpt-notes", out = root_ / "hf-notes";
    write_random_checkpoint(c, ckpt);
    const HfExportResult r = export_hugging_face(ckpt.string(), out.string());
    std::string all;
    for (const std::string& n : r.notes) all += n + "\n";
    QVERIFY2(all.find("capacity_factor 0.5") != std::string::npos, all.c_str());
    QVERIFY2(all.find("kittens") != std::string::npos, all.c_str());
    std::ifstream in(out / "README.md");
    std::stringstream readme;
    readme << in.rdbuf();
    QVERIFY(readme.str().find("capacity_factor 0.5") != std::string::npos);
    const HfTensorMap t = read_hf_tensors(out / "model.safetensors");
    const std::vector<int32_t> tokens = some_tokens(c.data.seq_len, 1);
    const double err = relative_error(mok_logits(ckpt, tokens), test::MixtralReference(t, read_hyper(out / "config.json"))
                                                                    .logits(std::vector<int>(tokens.begin(), tokens.end())));
    QVERIFY2(err < 1e-5, qPrintable(QString::number(err)));
  }

  void bf16ExportRoundsEveryValue() {
    const ExperimentConfig c = small_config(true);
    const fs::path ckpt = root_ / "ckpt-bf16", f32 = root_ / "hf-f32", bf16 = root_ / "hf-bf16";
    write_random_checkpoint(c, ckpt);
    export_hugging_face(ckpt.string(), f32.string());
    HfExportOptions o;
    o.dtype = "bfloat16";
    export_hugging_face(ckpt.string(), bf16.string(), o);
    const SafeTensorsFile fa = SafeTensorsFile::read((f32 / "model.safetensors").string());
    const SafeTensorsFile fb = SafeTensorsFile::read((bf16 / "model.safetensors").string());
    QCOMPARE(fb.tensors().size(), fa.tensors().size());
    QCOMPARE(fb.metadata().at("format"), std::string("pt"));
    for (const auto& [name, t] : fb.tensors()) {
      QVERIFY(t.dtype == SafeDType::bf16);
      const std::vector<float> exact = fa.read_f32(name), rounded = fb.read_f32(name);
      for (size_t i = 0; i < exact.size(); ++i) QCOMPARE(rounded[i], bf16_to_float(float_to_bf16(exact[i])));
    }
    const MixtralConfig mc = read_mixtral_config((bf16 / "config.json").string());
    QCOMPARE(mc.num_local_experts, 4);
  }

  void importRefusesWhatMokCannotCompute() {
    MixtralConfig mc;
    mc.model_type = "mixtral";
    mc.vocab_size = 256;
    mc.hidden_size = 32;
    mc.intermediate_size = 16;
    mc.num_hidden_layers = 1;
    mc.num_attention_heads = 4;
    mc.num_key_value_heads = 2;
    mc.num_local_experts = 4;
    mc.num_experts_per_tok = 2;
    QCOMPARE(mixtral_import_problem(mc, 64), std::string());
    MixtralConfig x = mc;
    x.head_dim = 16;
    QVERIFY(mixtral_import_problem(x, 64).find("head_dim") != std::string::npos);
    x = mc;
    x.sliding_window = 32;
    QVERIFY(mixtral_import_problem(x, 64).find("sliding_window") != std::string::npos);
    QCOMPARE(mixtral_import_problem(x, 32), std::string());  // the window covers the context
    x = mc;
    x.rope_type = "yarn";
    QVERIFY(mixtral_import_problem(x, 64).find("yarn") != std::string::npos);
    x = mc;
    x.hidden_act = "gelu";
    QVERIFY(mixtral_import_problem(x, 64).find("gelu") != std::string::npos);
  }
};

QTEST_GUILESS_MAIN(TestHfExport)
#include "test_hf_export.moc"
