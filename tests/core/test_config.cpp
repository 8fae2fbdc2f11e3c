// Experiment config: YAML round trips, every error class with its exact location and key
// path, --set overrides, the value checks, and the schema covering every struct field.
#include <QtTest>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include "core/config/config_io.h"
#include "core/config/tensor_kinds.h"
#include "core/util/replace_file.h"

using namespace mok;

// QCOMPARE on std::string does not print the values; through QString it does.
#define COMPARE_STR(a, b) QCOMPARE(QString::fromStdString(std::string(a)), QString::fromStdString(std::string(b)))

namespace {

// Number of fields of an aggregate: the largest N for which T{any × N} compiles. Lets the
// test see a field added to a config struct without a schema row.
struct AnyField {
  template <class T>
  operator T() const;
};

template <class T, class... A>
constexpr int field_count() {
  if constexpr (requires { T{A{}..., AnyField{}}; })
    return field_count<T, A..., AnyField>();
  else
    return static_cast<int>(sizeof...(A));
}

int rows_under(const std::string& prefix) {
  int n = 0;
  for (const ConfigKeySpec& s : experiment_config_schema())
    if (!s.in_map() && s.path.rfind(prefix, 0) == 0) ++n;
  return n;
}

// The error a parse throws, or a failed check when it throws none.
ConfigError parse_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_experiment_config(yaml, "t.yaml", overrides);
  } catch (const ConfigError& e) {
    return e;
  }
  return ConfigError("", -1, -1, "", "no error thrown");
}

// Every leaf key path in a YAML document ("model.d_model", "kittens.layers.0.rank").
void flatten(const YAML::Node& n, const std::string& prefix, std::set<std::string>& out) {
  if (n.IsMap() && n.size() > 0) {
    for (auto it = n.begin(); it != n.end(); ++it) {
      const std::string k = it->first.Scalar();
      flatten(YAML::Node(it->second), prefix.empty() ? k : prefix + "." + k, out);
    }
  } else {
    out.insert(prefix);
  }
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A valid config that differs from the defaults in every section, with awkward strings and
// doubles that only round-trip when printed with enough digits.
ExperimentConfig everything_changed() {
  ExperimentConfig c;
  c.name = "run: #1 \"quoted\" \\ true";
  c.seed = 18446744073709551615ull;
  c.data = {"/data/my corpus/", "bpe", 1024, 64, 0.1 + 0.2};
  c.model.layers = 6;
  c.model.d_model = 96;
  c.model.heads = 6;  // head width 16
  c.model.experts = 12;
  c.model.top_k = 3;
  c.model.expert_hidden = 48;
  c.model.dense_hidden = 200;
  c.model.moe_layers = "1,3,5";
  c.model.shared_expert = true;
  c.model.tie_embeddings = false;
  c.model.rope_theta = 500000.0;
  c.model.norm_eps = 1e-6;
  c.model.init_std = 1.0 / 3.0;
  c.model.aux_loss_coef = 0.0;
  c.model.z_loss_coef = 1e-300;
  c.train = {123, 24, 2, 6.02214076e-4, 0.05, 7, "linear", 0.0, 0.8, 0.999, 1e-12, 0.0, 11, 3, 50, 5, "fp32"};
  c.kittens.mode = "kitten";
  c.kittens.method = "rsvd";
  c.kittens.rank = 24;
  c.kittens.schedule = "adaptive";
  c.kittens.min_rank = 2;
  c.kittens.max_rank = 48;
  c.kittens.warmup_steps = 10;
  c.kittens.target_error = 0.125;
  c.kittens.refresh_every = 7;
  c.kittens.bits = 4;
  c.kittens.final_rank = 3;
  c.kittens.schedule_steps = 90;
  c.kittens.step_every = 20;
  c.kittens.step_factor = 1.0 / 3.0;
  c.kittens.power_iters = 2;
  c.kittens.factor_bits = 8;
  c.kittens.rounding = "stochastic";
  c.kittens.elementwise = "recompute";
  c.kittens.kinds[""] = {"rsvd", 12, 0};               // the catch-all: every linear input
  c.kittens.kinds["moe.expert"] = {"lowbit", -1, 4};
  c.kittens.kinds["attn.qkv.input"] = {"exact", -1, -1};
  c.kittens.kinds["moe.shared.down"] = {};
  c.kittens.layers[0] = {"exact", "", -1, -1};
  c.kittens.layers[2] = {"", "lowbit", 8, 4};
  c.kittens.layers[5] = {};
  c.routing = {"mok", "locality", 1.25, 0.05, 0.125, "never", 12.5, 7.5, 9, true};  // + locality loss, MoK cost model, overlap, calibration
  c.parallel = {"cuda", 3, "nccl", 4, 25.5, 3.5, true, "round_robin", "2,0,1", "16GiB"};
  c.logging = {"", false, "out dir/ckpt-caf\u00e9\x01"};
  c.logging.db = "yes";
  return c;
}

}  // namespace

class TestConfig : public QObject {
  Q_OBJECT
 private slots:
  // --- Round trips -------------------------------------------------------------------------

  void defaultsRoundTrip() {
    const ExperimentConfig d;
    const std::string yaml = experiment_config_to_yaml(d);
    const ExperimentConfig back = parse_experiment_config(yaml, "defaults");
    QVERIFY(back == d);
    QCOMPARE(experiment_config_to_yaml(back), yaml);
    QVERIFY(check_experiment_config(d).empty());
  }

  void quickstartLoadsAndRoundTrips() {
    const ExperimentConfig q = load_experiment_config(MOK_SOURCE_DIR "/experiments/quickstart.yaml");
    QCOMPARE(q.name, std::string("quickstart"));
    QCOMPARE(q.seed, uint64_t(1234));
    QCOMPARE(q.model.d_model, 128);
    QCOMPARE(q.model.experts, 8);
    QCOMPARE(q.train.lr, 3.0e-3);
    QCOMPARE(q.parallel.threads, 2);
    QVERIFY(parse_experiment_config(experiment_config_to_yaml(q), "printed") == q);
  }

  void everySectionChangedRoundTrips() {
    const ExperimentConfig c = everything_changed();
    const auto issues = check_experiment_config(c);
    for (const auto& i : issues) qWarning("%s: %s", i.key_path.c_str(), i.message.c_str());
    QVERIFY(issues.empty());
    const std::string yaml = experiment_config_to_yaml(c);
    const ExperimentConfig back = parse_experiment_config(yaml, "changed");
    QVERIFY(back == c);
    QVERIFY(!(back == ExperimentConfig{}));
    QCOMPARE(back.kittens.layers.size(), size_t(3));
    QCOMPARE(back.kittens.layers.at(2).rank, 8);
    QCOMPARE(back.kittens.layers.at(2).mode, std::string());
    QCOMPARE(back.kittens.layers.at(2).bits, 4);
    QCOMPARE(back.kittens.kinds.size(), size_t(4));
    QCOMPARE(back.kittens.kinds.at("").method, std::string("rsvd"));
    QCOMPARE(back.kittens.kinds.at("moe.expert").bits, 4);
    QVERIFY(back.kittens.kinds.at("moe.shared.down") == KittenKindOverride{});
    QVERIFY(yaml.find("    \"\": {method: rsvd, rank: 12, bits: 0}\n") != std::string::npos);
    QVERIFY(yaml.find("    moe.expert: {method: lowbit, bits: 4}\n") != std::string::npos);
    QCOMPARE(back.data.val_fraction, 0.1 + 0.2);  // exact, not 0.3
    QCOMPARE(back.name, c.name);
  }

  void gpuSettingsAreChecked() {
    auto issue_at = [](const ExperimentConfig& c, const std::string& key) {
      for (const auto& i : check_experiment_config(c))
        if (i.key_path == key) return true;
      return false;
    };
    ExperimentConfig c;
    c.parallel.device = "cuda";
    QVERIFY(check_experiment_config(c).empty());
    c.parallel.gpus = "1,2";  // two GPUs for one rank
    QVERIFY(issue_at(c, "parallel.gpus"));
    c.parallel.gpus = "x";
    QVERIFY(issue_at(c, "parallel.gpus"));
    c.parallel.gpus = "3";
    QVERIFY(!issue_at(c, "parallel.gpus"));
    // Two ranks on one GPU: not over NCCL, which takes one rank per GPU; over peer copies.
    c.parallel.ranks = 2;
    c.parallel.gpus = "0,0";
    c.parallel.comm = "nccl";
    QVERIFY(issue_at(c, "parallel.gpus"));
    c.parallel.comm = "peer";
    QVERIFY(!issue_at(c, "parallel.gpus"));
    c.parallel.gpus = "0,1";
    QVERIFY(check_experiment_config(c).empty());
    c.parallel.device = "cpu";  // peer copies move GPU memory
    QVERIFY(issue_at(c, "parallel.comm"));
    c.parallel.device = "cuda";
    c.parallel.ranks = 1;
    c.parallel.gpus = "3";
    c.parallel.comm = "local";
    for (const char* bad : {"lots", "0", "-2GiB", "16 gigs"}) {
      c.parallel.device_memory_limit = bad;
      QVERIFY2(issue_at(c, "parallel.device_memory_limit"), bad);
    }
    c.parallel.device_memory_limit = "24 GB";
    QVERIFY(!issue_at(c, "parallel.device_memory_limit"));
    ExperimentConfig cpu;
    cpu.train.precision = "bf16";
    QVERIFY(issue_at(cpu, "train.precision"));
    cpu.train.precision = "fp32";
    QVERIFY(check_experiment_config(cpu).empty());
  }

  void saveWritesWhatLoadReads() {
    QTemporaryDir dir;
    QVERIFY(dir.isValid());
    const std::string path = dir.filePath("saved.yaml").toStdString();
    const ExperimentConfig c = everything_changed();
    save_experiment_config(c, path);
    QVERIFY(load_experiment_config(path) == c);
    QVERIFY(!QFile::exists(QString::fromStdString(replace_file_temporary(path))));

    const std::string bad = dir.filePath("no/such/folder/x.yaml").toStdString();
    QVERIFY_THROWS_EXCEPTION(ConfigError, save_experiment_config(c, bad));
    QVERIFY(!QFile::exists(QString::fromStdString(bad)));
  }

  void numbersAndStringsPrintPlainly() {
    ExperimentConfig c;
    c.model.norm_eps = 1e-5;
    c.train.lr = 3e-3;
    c.model.rope_theta = 10000;
    c.name = "true";
    const std::string y = experiment_config_to_yaml(c);
    QVERIFY(y.find("  norm_eps: 1.0e-05\n") != std::string::npos);
    QVERIFY(y.find("  lr: 0.003\n") != std::string::npos);
    QVERIFY(y.find("  rope_theta: 10000.0\n") != std::string::npos);
    QVERIFY(y.find("name: \"true\"\n") != std::string::npos);
    // An integer is a fine float; a plain word is a fine string.
    const ExperimentConfig p = parse_experiment_config("train: {lr: 1}\nname: 42\n", "t");
    QCOMPARE(p.train.lr, 1.0);
    QCOMPARE(p.name, std::string("42"));
  }

  // --- The schema is complete and drives the printer -------------------------------------------

  void schemaCoversEveryField() {
    QCOMPARE(rows_under("data."), field_count<DataConfig>());
    QCOMPARE(rows_under("model."), field_count<ModelConfig>());
    QCOMPARE(rows_under("train."), field_count<TrainConfig>());
    QCOMPARE(rows_under("kittens.") + 2, field_count<KittensConfig>());  // + the kinds and layers maps
    QCOMPARE(rows_under("routing."), field_count<RoutingConfig>());
    QCOMPARE(rows_under("parallel."), field_count<ParallelConfig>());
    QCOMPARE(rows_under("logging."), field_count<LoggingConfig>());
    std::set<std::string> top;  // name, seed and the sections
    for (const ConfigKeySpec& s : experiment_config_schema()) top.insert(s.path.substr(0, s.path.find('.')));
    QCOMPARE(static_cast<int>(top.size()), field_count<ExperimentConfig>());
    int layer_rows = 0, kind_rows = 0, other_map_rows = 0;
    for (const ConfigKeySpec& s : experiment_config_schema()) {
      if (s.map == "kittens.layers") ++layer_rows;
      else if (s.map == "kittens.kinds") ++kind_rows;
      else other_map_rows += s.in_map();
    }
    QCOMPARE(layer_rows, field_count<KittenLayerOverride>());
    QCOMPARE(kind_rows, field_count<KittenKindOverride>());
    QCOMPARE(other_map_rows, 0);
    QCOMPARE(experiment_config_maps().size(), size_t(2));
    for (const ConfigMapSpec& m : experiment_config_maps()) QVERIFY(find_config_map(m.path) == &m);
  }

  void everyRowReachesItsOwnField() {
    // Changing one row's value changes that row only: no two rows share a field.
    ExperimentConfig d = everything_changed();
    d.train.activation_checkpointing = true;  // left out there: it refuses kittens, which the rest use
    d.kittens.layers[2] = {"kitten", "lowbit", 8, 4};
    d.kittens.kinds["moe.expert"] = {"subspace", 16, 8};
    // The entry each map row is read at (plain rows ignore it).
    auto entry = [](const ConfigKeySpec& s) { return std::string(s.map == "kittens.kinds" ? "moe.expert" : "2"); };
    const ExperimentConfig base;
    for (const ConfigKeySpec& s : experiment_config_schema()) {
      const std::string e = entry(s);
      QVERIFY2(s.get(d, e) != s.get(base, e), ("everything_changed() keeps " + s.path).c_str());
      ExperimentConfig c = base;
      s.set(c, e, *s.get(d, e));
      QVERIFY2(s.get(c, e) == s.get(d, e), s.path.c_str());
      for (const ConfigKeySpec& other : experiment_config_schema()) {
        if (&other == &s) continue;
        const std::string oe = entry(other);
        QVERIFY2(other.get(c, oe) == other.get(base, oe), (s.path + " also changes " + other.path).c_str());
      }
    }
  }

  void printedKeysAreExactlyTheSchemaKeys() {
    ExperimentConfig c;
    c.kittens.layers[0] = {"kitten", "rsvd", 8, 4};
    c.kittens.kinds["moe.expert"] = {"rsvd", 8, 4};
    std::set<std::string> printed;
    flatten(YAML::Load(experiment_config_to_yaml(c)), "", printed);
    std::set<std::string> schema;
    for (const ConfigKeySpec& s : experiment_config_schema())
      schema.insert(s.path_for(s.map == "kittens.kinds" ? "moe.expert" : "0"));
    QCOMPARE(printed, schema);
    // With no overrides the maps print as {}.
    const std::string plain = experiment_config_to_yaml(ExperimentConfig{});
    QVERIFY(plain.find("  layers: {}\n") != std::string::npos);
    QVERIFY(plain.find("  kinds: {}\n") != std::string::npos);
  }

  void schemaRowsAreWellFormed() {
    std::set<std::string> paths;
    for (const ConfigKeySpec& s : experiment_config_schema()) {
      QVERIFY2(paths.insert(s.path).second, s.path.c_str());
      QVERIFY2(!s.meaning.empty(), s.path.c_str());
      QVERIFY2(!s.default_text.empty(), s.path.c_str());
      QVERIFY(find_config_key(s.path) == &s);
    }
    QCOMPARE(find_config_key("model.d_model")->default_text, std::string("128"));
    QCOMPARE(find_config_key("train.lr")->default_text, std::string("0.003"));
    QCOMPARE(find_config_key("kittens.layers.<L>.rank")->default_text, std::string("inherit"));
    QCOMPARE(find_config_key("kittens.kinds.<K>.bits")->default_text, std::string("inherit"));
    QCOMPARE(find_config_key("kittens.kinds.<K>.bits")->path_for("moe.expert"), std::string("kittens.kinds.moe.expert.bits"));
    QCOMPARE(find_config_key("kittens.kinds.<K>.bits")->path_for(""), std::string("kittens.kinds.\"\".bits"));
    QCOMPARE(find_config_key("kittens.layers.<L>.bits")->path_for("3"), std::string("kittens.layers.3.bits"));
  }

  void docsContainTheGeneratedTable() {
    const std::string doc = read_text(MOK_SOURCE_DIR "/docs/config.md");
    QVERIFY2(doc.find(config_schema_markdown()) != std::string::npos,
             "docs/config.md is stale: regenerate its key reference with `mok config schema --markdown`");
  }

  // --- Errors: exact location and key path -----------------------------------------------------

  void syntaxErrorHasYamlPosition() {
    const ConfigError e = parse_error("name: x\n  seed: 3\n");
    QCOMPARE(e.file, std::string("t.yaml"));
    QCOMPARE(e.line, 2);
    QCOMPARE(e.column, 7);
    QCOMPARE(e.key_path, std::string());
    QVERIFY(std::string(e.what()).rfind("t.yaml:2:7: YAML syntax error: ", 0) == 0);
  }

  void emptyAndNonMapDocuments() {
    for (const char* text : {"", "   \n", "# nothing but a comment\n"}) {
      const ConfigError e = parse_error(text);
      COMPARE_STR(std::string(e.what()),
               std::string("t.yaml: empty config: expected a YAML map with keys such as name, model, train"));
    }
    COMPARE_STR(std::string(parse_error("- a\n- b\n").what()),
             std::string("t.yaml:1:1: expected a map of keys at the top level, got a list"));
    COMPARE_STR(std::string(parse_error("name: a\n---\nname: b\n").what()),
             std::string("t.yaml:3:1: expected one YAML document, found 2"));
  }

  void missingFileIsAConfigError() {
    try {
      load_experiment_config("/nonexistent/dir/x.yaml");
      QFAIL("no error");
    } catch (const ConfigError& e) {
      QCOMPARE(e.file, std::string("/nonexistent/dir/x.yaml"));
      QCOMPARE(e.line, 0);
      COMPARE_STR(std::string(e.what()),
               std::string("/nonexistent/dir/x.yaml: cannot read file: No such file or directory"));
    }
    QVERIFY_THROWS_EXCEPTION(ConfigError, load_experiment_config(MOK_SOURCE_DIR "/experiments"));
  }

  void unknownKeysSuggest() {
    COMPARE_STR(std::string(parse_error("name: x\nmodel:\n  d_modle: 64\n").what()),
             std::string("t.yaml:3:3: model.d_modle: unknown key; did you mean 'model.d_model'?"));
    COMPARE_STR(std::string(parse_error("nmae: x\n").what()),
             std::string("t.yaml:1:1: nmae: unknown key; did you mean 'name'?"));
    // A key in the wrong section points at where it lives.
    COMPARE_STR(std::string(parse_error("model: {lr: 0.1}\n").what()),
             std::string("t.yaml:1:9: model.lr: unknown key; did you mean 'train.lr'?"));
    COMPARE_STR(std::string(parse_error("kittens:\n  layers:\n    2: {rnak: 8}\n").what()),
             std::string("t.yaml:3:9: kittens.layers.2.rnak: unknown key; did you mean 'kittens.layers.2.rank'?"));
    COMPARE_STR(parse_error("model.d_model: 64\n").what(),
                "t.yaml:1:1: model.d_model: dotted keys are for --set only; in a file, nest the key under its section");
    const ConfigError far = parse_error("zzzzzzzzzz: 1\n");
    COMPARE_STR(std::string(far.what()), std::string("t.yaml:1:1: zzzzzzzzzz: unknown key"));
  }

  void wrongTypes() {
    struct Case {
      const char* yaml;
      const char* what;
    };
    const Case cases[] = {
        {"train:\n  steps: 3.5\n", "t.yaml:2:10: train.steps: expected an integer, got '3.5'"},
        {"train:\n  steps: many\n", "t.yaml:2:10: train.steps: expected an integer, got 'many'"},
        {"data: {seq_len: \"128\"}\n", "t.yaml:1:17: data.seq_len: expected an integer, got the quoted string \"128\""},
        {"train: {lr: fast}\n", "t.yaml:1:13: train.lr: expected a number, got 'fast'"},
        {"train: {lr: .nan}\n", "t.yaml:1:13: train.lr: expected a number, got '.nan'"},
        {"model: {shared_expert: yes}\n", "t.yaml:1:24: model.shared_expert: expected true or false, got 'yes'"},
        {"seed: -1\n", "t.yaml:1:7: seed: expected a non-negative integer, got '-1'"},
        {"model: [1, 2]\n", "t.yaml:1:8: model: expected a map of keys, got a list"},
        {"model:\n  layers: {a: 1}\n", "t.yaml:2:11: model.layers: expected an integer, got a map"},
        {"name: [a]\n", "t.yaml:1:7: name: expected a string, got a list"},
        {"train:\n  lr:\n", "t.yaml:2:3: train.lr: missing value (expected a number)"},
        {"model: {layers: 99999999999}\n", "t.yaml:1:17: model.layers: integer 99999999999 is too large"},
        {"kittens: {layers: [1]}\n", "t.yaml:1:19: kittens.layers: expected a map from layer index to overrides, e.g. {2: {rank: 32}}, got a list"},
        {"kittens: {layers: {x: {rank: 4}}}\n", "t.yaml:1:20: kittens.layers.x: layer index must be a non-negative integer, got 'x'"},
        {"kittens: {layers: {1: 5}}\n", "t.yaml:1:23: kittens.layers.1: expected a map of per-layer keys, got '5'"},
    };
    for (const Case& c : cases) COMPARE_STR(std::string(parse_error(c.yaml).what()), std::string(c.what));
  }

  void duplicateKeys() {
    COMPARE_STR(std::string(parse_error("name: a\nname: b\n").what()), std::string("t.yaml:2:1: name: duplicate key"));
    COMPARE_STR(std::string(parse_error("kittens:\n  layers: {1: {}, 1: {}}\n").what()),
             std::string("t.yaml:2:19: kittens.layers.1: duplicate layer index"));
  }

  void valueErrorsPointAtTheirKey() {
    struct Case {
      const char* yaml;
      const char* what;
    };
    const Case cases[] = {
        {"train:\n  lr: -1\n", "t.yaml:2:3: train.lr: must be in (0.0, 10.0], got -1.0"},
        {"model:\n  experts: 8\n  top_k: 9\n", "t.yaml:3:3: model.top_k: model.top_k (9) exceeds model.experts (8)"},
        {"model:\n  heads: 3\n", "t.yaml:2:3: model.heads: model.heads (3) must divide model.d_model (128)"},
        {"model: {d_model: 96, heads: 32}\n",
         "t.yaml:1:22: model.heads: head width d_model/heads = 3 must be even for the rotary embedding"},
        {"train: {batch: 10, grad_accum: 3}\n",
         "t.yaml:1:9: train.batch: train.batch (10) must be a multiple of train.grad_accum (3) × parallel.ranks (1)"},
        {"parallel: {ranks: 3}\ntrain: {batch: 24}\n", "t.yaml:1:12: parallel.ranks: model.experts (8) must be a multiple of parallel.ranks (3)"},
        {"kittens: {rank: 100}\n",
         "t.yaml:1:11: kittens.rank: rank 100 is outside [kittens.min_rank, kittens.max_rank] = [4, 64]"},
        {"kittens: {layers: {7: {rank: 8}}}\n",
         "t.yaml:1:20: kittens.layers.7: layer index 7 is out of range: model.layers is 4"},
        {"kittens: {layers: {1: {method: svd}}}\n",
         "t.yaml:1:24: kittens.layers.1.method: must be one of sketch, rsvd, subspace, lowbit; got 'svd'"},
        {"parallel: {comm: nccl}\n", "t.yaml:1:12: parallel.comm: nccl moves data between GPUs and needs parallel.device cuda (device is cpu); "
         "CPU ranks exchange over local or mpi"},
        {"model: {moe_layers: \"1,9\"}\n", "t.yaml:1:9: model.moe_layers: layer 9 is out of range: model.layers is 4"},
        {"kittens: {bits: 5}\n", "t.yaml:1:11: kittens.bits: must be one of 4, 8; got '5'"},
        {"name: \"\"\n", "t.yaml:1:1: name: must not be empty"},
        {"routing:\n  policy: topk\n  locality_aux_coef: -0.01\n",
         "t.yaml:3:3: routing.locality_aux_coef: must be in [0.0, 100.0], got -0.01"},
        {"routing: {locality_aux_coef: 1000}\n", "t.yaml:1:11: routing.locality_aux_coef: must be in [0.0, 100.0], got 1000.0"},
    };
    for (const Case& c : cases) COMPARE_STR(std::string(parse_error(c.yaml).what()), std::string(c.what));
  }

  void valueErrorOnADefaultedKeyPointsAtItsSection() {
    // top_k keeps its default 2; the file only lowers experts, so the section is the place.
    const ConfigError e = parse_error("name: x\nmodel:\n  experts: 1\n");
    QCOMPARE(e.key_path, std::string("model.top_k"));
    QCOMPARE(e.line, 2);
    QCOMPARE(e.column, 1);
  }

  // --- Overrides ---------------------------------------------------------------------------------

  void overridesSetTypedValues() {
    ExperimentConfig c;
    apply_override(c, "model.d_model=256");
    apply_override(c, "name=my run");
    apply_override(c, "train.lr=1e-4");
    apply_override(c, "kittens.layers.2.rank=32");
    apply_override(c, "kittens.layers.2.method=rsvd");
    apply_override(c, "model={layers: 2, heads: 8}");
    apply_override(c, "logging.progress=false");
    QCOMPARE(c.model.d_model, 256);
    QCOMPARE(c.name, std::string("my run"));
    QCOMPARE(c.train.lr, 1e-4);
    QCOMPARE(c.kittens.layers.at(2).rank, 32);
    QCOMPARE(c.kittens.layers.at(2).method, std::string("rsvd"));
    QCOMPARE(c.kittens.layers.at(2).mode, std::string());
    QCOMPARE(c.model.layers, 2);
    QCOMPARE(c.model.heads, 8);
    QCOMPARE(c.model.experts, 8);  // untouched by the section override
    QCOMPARE(c.logging.progress, false);
    apply_override(c, "kittens.layers={0: {mode: kitten}}");  // replaces the whole map
    QCOMPARE(c.kittens.layers.size(), size_t(1));
    QCOMPARE(c.kittens.layers.at(0).mode, std::string("kitten"));
  }

  void overridesApplyAfterTheFile() {
    const ExperimentConfig c =
        parse_experiment_config("train: {steps: 10}\n", "t.yaml", {"train.steps=20", "train.steps=30"});
    QCOMPARE(c.train.steps, 30);
  }

  void badOverrides() {
    auto err = [](const std::string& a) -> std::string {
      ExperimentConfig c;
      try {
        apply_override(c, a);
      } catch (const ConfigError& e) {
        return e.what();
      }
      return "no error";
    };
    QCOMPARE(err("model.d_model"), std::string("--set:1:1: expected dotted.key=value, got 'model.d_model'"));
    QCOMPARE(err("=3"), std::string("--set:1:1: expected dotted.key=value, got '=3'"));
    QCOMPARE(err("model..heads=3"), std::string("--set:1:7: model..heads: empty key segment in 'model..heads'"));
    QCOMPARE(err("model.d_modl=64"), std::string("--set:1:7: model.d_modl: unknown key; did you mean 'model.d_model'?"));
    QCOMPARE(err("lr=0.1"), std::string("--set:1:1: lr: unknown key; did you mean 'train.lr'?"));
    QCOMPARE(err("train.lr=abc"), std::string("--set:1:10: train.lr: expected a number, got 'abc'"));
    QCOMPARE(err("train.steps=[1, 2]"), std::string("--set:1:13: train.steps: expected an integer, got a list"));
    QCOMPARE(err("train.steps="), std::string("--set:1:13: train.steps: missing value (expected an integer)"));
    QCOMPARE(err("train.lr.x=1"), std::string("--set:1:10: train.lr.x: 'train.lr' is a single value, not a section"));
    QCOMPARE(err("model=3"), std::string("--set:1:7: model: expected a map of keys, got '3'"));
    QCOMPARE(err("kittens.layers.two.rank=3"),
             std::string("--set:1:16: kittens.layers.two: layer index must be a non-negative integer, got 'two'"));
    QCOMPARE(err("kittens.layers.2.rnak=3"),
             std::string("--set:1:18: kittens.layers.2.rnak: unknown key; did you mean 'kittens.layers.2.rank'?"));
    QCOMPARE(err("model={layers: 2, hedas: 8}"),
             std::string("--set:1:19: model.hedas: unknown key; did you mean 'model.heads'?"));
    QVERIFY(err("name=[unclosed").rfind("--set:1:", 0) == 0);
  }

  void overrideValueErrorsNameTheSet() {
    // The second --set breaks a rule: the error points at it, not at the file.
    const ConfigError e = parse_error("model: {heads: 4}\n", {"train.steps=5", "model.heads=3"});
    COMPARE_STR(std::string(e.what()), std::string("--set:2:13: model.heads: model.heads (3) must divide model.d_model (128)"));
    QCOMPARE(e.file, std::string("--set"));
    QCOMPARE(e.line, 2);
    QCOMPARE(e.column, 13);
  }

  // --- kittens.kinds: a map keyed by tensor kind ------------------------------------------------

  void kindsParseAndPrint() {
    const ExperimentConfig c = parse_experiment_config(
        "kittens:\n  mode: custom\n  kinds:\n    moe.expert: {method: lowbit, bits: 4}\n"
        "    \"attn.qkv.input\": {method: exact}\n    \"\": {method: sketch, rank: 8, bits: 8}\n"
        "    attn_norm: {method: recompute}\n",
        "t.yaml");
    QCOMPARE(c.kittens.kinds.size(), size_t(4));
    QVERIFY((c.kittens.kinds.at("moe.expert") == KittenKindOverride{"lowbit", -1, 4}));
    QVERIFY((c.kittens.kinds.at("attn.qkv.input") == KittenKindOverride{"exact", -1, -1}));
    QVERIFY((c.kittens.kinds.at("") == KittenKindOverride{"sketch", 8, 8}));
    QCOMPARE(c.kittens.kinds.at("attn_norm").method, std::string("recompute"));
    const std::string yaml = experiment_config_to_yaml(c);
    QVERIFY(yaml.find("  kinds:\n    \"\": {method: sketch, rank: 8, bits: 8}\n    attn.qkv.input: {method: exact}\n"
                      "    attn_norm: {method: recompute}\n    moe.expert: {method: lowbit, bits: 4}\n") !=
            std::string::npos);
    QVERIFY(parse_experiment_config(yaml, "printed") == c);
    // The map in a file replaces; an empty one clears.
    QVERIFY(parse_experiment_config("kittens: {kinds: {}}\n", "t.yaml").kittens.kinds.empty());
    QVERIFY(parse_experiment_config("kittens: {kinds: }\n", "t.yaml").kittens.kinds.empty());
    // An entry with nothing in it inherits everything.
    QVERIFY((parse_experiment_config("kittens: {kinds: {head: }}\n", "t.yaml").kittens.kinds.at("head") ==
             KittenKindOverride{}));
  }

  void kindsErrors() {
    struct Case {
      const char* yaml;
      const char* what;
    };
    const Case cases[] = {
        {"kittens: {kinds: [moe]}\n",
         "t.yaml:1:18: kittens.kinds: expected a map from tensor kind to overrides, e.g. {moe.expert: {method: "
         "lowbit, bits: 4}}, got a list"},
        {"kittens: {kinds: {moe: 4}}\n", "t.yaml:1:24: kittens.kinds.moe: expected a map of per-kind keys, got '4'"},
        {"kittens: {kinds: {[a]: {}}}\n", "t.yaml:1:19: kittens.kinds: expected a tensor kind name, got a list"},
        {"kittens:\n  kinds:\n    moe.expert: {bist: 4}\n",
         "t.yaml:3:18: kittens.kinds.moe.expert.bist: unknown key; did you mean 'kittens.kinds.moe.expert.bits'?"},
        {"kittens:\n  kinds:\n    moe.expert: {mode: exact}\n",
         "t.yaml:3:18: kittens.kinds.moe.expert.mode: unknown key; kittens.kinds entries take method, rank, bits"},
        {"kittens:\n  kinds:\n    moe.expert: {}\n    moe.expert: {}\n",
         "t.yaml:4:5: kittens.kinds.moe.expert: duplicate tensor kind"},
        {"kittens: {kinds: {head: {bits: \"4\"}}}\n",
         "t.yaml:1:32: kittens.kinds.head.bits: expected an integer, got the quoted string \"4\""},
        // Value checks: the same choices and ranges as the section's own keys.
        {"kittens:\n  kinds:\n    moe.expert: {bits: 5}\n",
         "t.yaml:3:18: kittens.kinds.moe.expert.bits: must be one of 0, 4, 8; got '5'"},
        {"kittens:\n  kinds:\n    moe.expert: {method: svd}\n",
         "t.yaml:3:18: kittens.kinds.moe.expert.method: must be one of exact, sketch, rsvd, subspace, lowbit, "
         "recompute, lowrank; got 'svd'"},
        {"kittens:\n  kinds:\n    moe.expert: {rank: 0}\n",
         "t.yaml:3:18: kittens.kinds.moe.expert.rank: must be in [1, 65536], got 0"},
        {"kittens:\n  kinds:\n    head: {rank: 100}\n",
         "t.yaml:3:12: kittens.kinds.head.rank: rank 100 is outside [kittens.min_rank, kittens.max_rank] = [4, 64]"},
        // Kind names: a prefix of a kind the model saves, else a did-you-mean.
        {"kittens:\n  kinds:\n    moe.expret: {bits: 4}\n",
         "t.yaml:3:5: kittens.kinds.moe.expret: unknown tensor kind 'moe.expret'; did you mean 'moe.expert'?"},
        {"kittens:\n  kinds:\n    attn.qvk.input: {}\n",
         "t.yaml:3:5: kittens.kinds.attn.qvk.input: unknown tensor kind 'attn.qvk.input'; did you mean "
         "'attn.qkv.input'?"},
        {"kittens: {kinds: {zzzzzzzz: {}}}\n",
         "t.yaml:1:19: kittens.kinds.zzzzzzzz: unknown tensor kind 'zzzzzzzz'; kinds are prefixes of the model's "
         "saved tensors, e.g. moe.expert, attn.qkv.input, attn_norm.input"},
        {"kittens:\n  layers:\n    1: {bits: 6}\n",
         "t.yaml:3:9: kittens.layers.1.bits: must be one of 4, 8; got '6'"},
    };
    for (const Case& c : cases) COMPARE_STR(std::string(parse_error(c.yaml).what()), std::string(c.what));
    // Prefixes of known kinds, whole or not, are fine: the policy matches by prefix.
    for (const char* kind : {"moe", "moe.expert.up", "moe.expert.up.input", "attn.q", "head", "final_norm.input"})
      QVERIFY2(parse_error(std::string("kittens: {kinds: {\"") + kind + "\": {}}}\n").line == -1, kind);
  }

  void kindsOverrides() {
    ExperimentConfig c;
    apply_override(c, "kittens.kinds.moe.expert.bits=4");
    apply_override(c, "kittens.kinds.moe.expert.method=lowbit");
    apply_override(c, "kittens.kinds.attn.qkv.input={method: exact}");
    apply_override(c, "kittens.kinds.head={rank: 8}");
    QCOMPARE(c.kittens.kinds.size(), size_t(3));
    QVERIFY((c.kittens.kinds.at("moe.expert") == KittenKindOverride{"lowbit", -1, 4}));
    QVERIFY((c.kittens.kinds.at("attn.qkv.input") == KittenKindOverride{"exact", -1, -1}));
    QVERIFY((c.kittens.kinds.at("head") == KittenKindOverride{"", 8, -1}));
    apply_override(c, "kittens.kinds.moe.expert={rank: 16}");  // sets the given keys, keeps the rest
    QVERIFY((c.kittens.kinds.at("moe.expert") == KittenKindOverride{"lowbit", 16, 4}));
    apply_override(c, "kittens.kinds={\"\": {method: lowbit, bits: 4}, moe: {method: sketch}}");  // replaces
    QCOMPARE(c.kittens.kinds.size(), size_t(2));
    QVERIFY((c.kittens.kinds.at("") == KittenKindOverride{"lowbit", -1, 4}));
    QCOMPARE(c.kittens.kinds.at("moe").method, std::string("sketch"));
    apply_override(c, "kittens.layers.1.bits=4");
    QCOMPARE(c.kittens.layers.at(1).bits, 4);

    auto err = [](const std::string& a) -> std::string {
      ExperimentConfig x;
      try {
        apply_override(x, a);
      } catch (const ConfigError& e) {
        return e.what();
      }
      return "no error";
    };
    COMPARE_STR(err("kittens.kinds.moe.expert.bist=4"),
                "--set:1:26: kittens.kinds.moe.expert.bist: unknown key; did you mean 'kittens.kinds.moe.expert.bits'?");
    COMPARE_STR(err("kittens.kinds.moe.expert.bits=four"),
                "--set:1:31: kittens.kinds.moe.expert.bits: expected an integer, got 'four'");
    COMPARE_STR(err("kittens.kinds.moe=4"), "--set:1:19: kittens.kinds.moe: expected a map of per-kind keys, got '4'");
    COMPARE_STR(err("kittens.kinds=[1]"),
                "--set:1:15: kittens.kinds: expected a map from tensor kind to overrides, e.g. {moe.expert: {method: "
                "lowbit, bits: 4}}, got a list");
    COMPARE_STR(err("kittens.kinds.moe.expert.bits="),
                "--set:1:31: kittens.kinds.moe.expert.bits: missing value (expected an integer)");
    COMPARE_STR(err("kittens.layers.1.bits.x=4"),
                "--set:1:23: kittens.layers.1.bits.x: 'kittens.layers.1.bits' is a single value, not a section");
    COMPARE_STR(err("kittens.kindz.moe.bits=4"),
                "--set:1:9: kittens.kindz: unknown key; did you mean 'kittens.kinds'?");
    // Value checks after --set point at the argument.
    const ConfigError e = parse_error("name: x\n", {"kittens.kinds.moe.expret.bits=4"});
    COMPARE_STR(e.what(), "--set:1:31: kittens.kinds.moe.expret: unknown tensor kind 'moe.expret'; did you mean "
                          "'moe.expert'?");
    const ConfigError r = parse_error("name: x\n", {"kittens.kinds.moe.bits=3"});
    COMPARE_STR(r.what(), "--set:1:24: kittens.kinds.moe.bits: must be one of 0, 4, 8; got '3'");
  }

  void knownTensorKinds() {
    // Every kind the kitten policy is asked about: linear inputs and elementwise tensors.
    const auto& kinds = kitten_tensor_kinds();
    for (const char* k : {"attn.qkv.input", "moe.expert.down.input", "moe.router.input", "head.input", "attn.qkv",
                          "ffn_norm.input", "mlp.act.input"})
      QVERIFY2(std::find(kinds.begin(), kinds.end(), std::string(k)) != kinds.end(), k);
    QVERIFY(is_kitten_tensor_kind_prefix(""));
    QVERIFY(is_kitten_tensor_kind_prefix("moe.exp"));
    QVERIFY(!is_kitten_tensor_kind_prefix("moe.expert.up.input.x"));
    QCOMPARE(suggest_kitten_tensor_kind("mlp.dwon"), std::string("mlp.down"));
    QCOMPARE(suggest_kitten_tensor_kind("qqqqqqqqqq"), std::string());
  }

  // --- check_experiment_config ------------------------------------------------------------------

  void checkListsEveryIssue() {
    ExperimentConfig c;
    c.model.heads = 5;            // does not divide 128
    c.model.top_k = 9;            // > 8 experts
    c.train.batch = 0;            // below range
    c.kittens.min_rank = 80;      // > max_rank
    c.kittens.layers[3].rank = 2; // below min_rank
    const auto issues = check_experiment_config(c);
    std::vector<std::string> keys;
    for (const auto& i : issues) keys.push_back(i.key_path);
    const std::vector<std::string> expected = {"train.batch",      "model.heads",  "model.top_k",
                                               "kittens.min_rank", "kittens.rank", "kittens.layers.3.rank"};
    QCOMPARE(keys, expected);
  }

  void checkKittenRankAgainstWidth() {
    ExperimentConfig c;
    c.model.d_model = 32;
    c.model.heads = 2;
    c.kittens.rank = 48;
    QVERIFY(check_experiment_config(c).empty());  // exact mode: the rank is unused
    c.kittens.mode = "kitten";
    const auto issues = check_experiment_config(c);
    QCOMPARE(issues.size(), size_t(1));
    QCOMPARE(issues[0].key_path, std::string("kittens.rank"));
    QCOMPARE(issues[0].message, std::string("rank 48 exceeds model.d_model (32)"));
  }

  void denseModelSkipsExpertRules() {
    ExperimentConfig c;
    c.model.experts = 0;
    c.model.top_k = 4;
    c.parallel.ranks = 2;
    QVERIFY(check_experiment_config(c).empty());
  }

  void moeLayerSpecs() {
    QCOMPARE(parse_moe_layers("all", 3), std::vector<bool>({true, true, true}));
    QCOMPARE(parse_moe_layers("none", 2), std::vector<bool>({false, false}));
    QCOMPARE(parse_moe_layers("every_2", 4), std::vector<bool>({false, true, false, true}));
    QCOMPARE(parse_moe_layers("0, 2", 3), std::vector<bool>({true, false, true}));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_moe_layers("1,1", 3));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_moe_layers("every_0", 3));
    QVERIFY_THROWS_EXCEPTION(std::invalid_argument, parse_moe_layers("some", 3));
  }
};

QTEST_GUILESS_MAIN(TestConfig)
#include "test_config.moc"
