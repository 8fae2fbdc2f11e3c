// `mok plan` as a user runs it: the bytes per rank by category add up to the total; a
// capacity decides the exit code and the largest batch that fits; bad input exits 2. And the
// plan is close to what a run measures: on the quickstart model's shape the planned total is
// within 5 % of the memory tracker's peak (the tracker's figures do not depend on the machine),
// and its saved activations are within 5 % of the run's peak saved-activation bytes with the
// kitten policy as well as exact (experiments/quickstart.yaml, experiments/kittens_quickstart.yaml).
// The card count and the advice agree with the plan itself (an advised change does fit, one
// rank fewer does not), and the generation plan is the tracker's peak of `mok generate`.
#include <QtTest>

#include <cmath>

#include <QDir>
#include <QFile>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonObject>
#include <QHash>
#include <QSet>
#include <QTemporaryDir>

#include "core/plan/fit_advice.h"
#include "support/cli_process.h"
#include "support/tiny_experiment.h"

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd) {
  return mok::test::run_command(MOK_CLI_PATH, args, cwd);
}

// An advice entry as mok plan arguments: "--set k=v" for each set, then its flags.
QStringList advice_args(const QJsonObject& option) {
  QStringList args;
  for (const QJsonValue& s : option["sets"].toArray()) args << "--set" << s.toString();
  for (const QJsonValue& f : option["flags"].toArray()) args << f.toString();
  return args;
}

}  // namespace

class TestCliPlan : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString config_;

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const QString corpus = tmp_.path() + "/corpus";
    const std::string problem = mok::test::copy_brown_sample(corpus.toStdString());
    QVERIFY2(problem.empty(), problem.c_str());
    // The quickstart model (experiments/quickstart.yaml) on a sample of its corpus.
    config_ = tmp_.path() + "/plan.yaml";
    QFile f(config_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QString("name: plan\nseed: 1234\n"
                    "data:     {corpus: %1, tokenizer: byte, seq_len: 128}\n"
                    "model:    {layers: 4, d_model: 128, heads: 4, experts: 8, top_k: 2, expert_hidden: 256}\n"
                    "train:    {steps: 2, batch: 16, lr: 3.0e-3, warmup_steps: 1, eval_every: 2, eval_batches: 1}\n"
                    "routing:  {dispatcher: classic, policy: topk, capacity_factor: 0}\n"
                    "parallel: {device: cpu, ranks: 1, comm: local, threads: 2}\n"
                    "logging:  {checkpoint_dir: %2/ck}\n")
                .arg(corpus, tmp_.path())
                .toUtf8());
  }

  void categoriesAddUpAndCapacityDecides() {
    const Result r = run_mok({"plan", config_, "--json", "--device-memory", "1GiB"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    const QJsonObject bytes = r.json["bytes"].toObject();
    double sum = 0.0;
    for (const char* c : {"parameters", "gradients", "optimizer_state", "saved_activations", "workspace",
                          "communication"}) {
      QVERIFY2(bytes.contains(c), c);
      sum += bytes[c].toDouble();
    }
    QVERIFY(std::abs(sum - r.json["total_bytes"].toDouble()) <= 1.0);
    QCOMPARE(r.json["fits"].toBool(), true);
    QVERIFY(r.json["largest_batch"].toInt() > 16);
    // Batch raised to what the capacity allows: still fits; one step more does not.
    const int largest = r.json["largest_batch"].toInt();
    QCOMPARE(run_mok({"plan", config_, "--device-memory", "1GiB", "--set", QString("train.batch=%1").arg(largest)},
                     tmp_.path())
                 .exit_code,
             0);
    QCOMPARE(run_mok({"plan", config_, "--device-memory", "1GiB", "--set",
                      QString("train.batch=%1").arg(largest + 1)},
                     tmp_.path())
                 .exit_code,
             1);

    const Result small = run_mok({"plan", config_, "--json", "--device-memory", "64MiB"}, tmp_.path());
    QCOMPARE(small.exit_code, 1);
    QCOMPARE(small.json["fits"].toBool(), false);
    QVERIFY(small.json["largest_batch"].toInt() < 16);
    const Result text = run_mok({"plan", config_, "--device-memory", "64MiB"}, tmp_.path());
    QVERIFY2(text.out.contains("does not fit") && text.out.contains("saved_activations"), qPrintable(text.out));
  }

  // The saved activations by kind (--json always, text with --by-kind): they add up to the
  // category; in kitten mode, on one rank, the norm outputs (the router's and the experts'
  // inputs too) and the experts' SwiGLU hidden are recomputed (0 bytes), the pre-activations
  // kept in 8 bits, the other linear inputs in 4, in every layer.
  void savedActivationsByKind() {
    const Result r = run_mok({"plan", config_, "--json", "--set", "kittens.mode=kitten"}, tmp_.path());
    QCOMPARE(r.exit_code, 0);
    double sum = 0.0;
    QHash<QString, QJsonObject> rows;
    for (const QJsonValue& v : r.json["saved_by_kind"].toArray()) {
      const QJsonObject row = v.toObject();
      sum += row["bytes"].toDouble();
      rows.insert(row["kind"].toString(), row);
    }
    QVERIFY(std::abs(sum - r.json["bytes"].toObject()["saved_activations"].toDouble()) <= 1.0);
    const struct {
      const char* kind;
      const char* kept;
    } expected[] = {{"moe.expert.down.input", "recompute"},
                    {"moe.expert.up.input", "recompute"},
                    {"moe.router.input", "recompute"},
                    {"attn.qkv.input", "recompute"},
                    {"moe.expert.act.input", "lowbit 8"},
                    {"attn.out.input", "lowbit 4"}};
    for (const auto& e : expected) {
      QVERIFY2(rows.contains(e.kind), e.kind);
      QCOMPARE(rows[e.kind]["kept"].toString(), QString(e.kept));
      QCOMPARE(rows[e.kind]["layers"].toInt(), 4);
    }
    QCOMPARE(rows["moe.expert.down.input"]["bytes"].toDouble(), 0.0);
    QVERIFY(rows["moe.expert.act.input"]["bytes"].toDouble() > 0.0);
    const Result text = run_mok({"plan", config_, "--by-kind", "--set", "kittens.mode=kitten"}, tmp_.path());
    QCOMPARE(text.exit_code, 0);
    QVERIFY2(text.out.contains("by kind") && text.out.contains("moe.expert.act.input") &&
                 text.out.contains("lowbit 8"),
             qPrintable(text.out));
    QCOMPARE(run_mok({"plan", config_, "--by-kind", "--generate"}, tmp_.path()).exit_code, 2);
  }

  void badInputExitsTwo() {
    const Result size = run_mok({"plan", config_, "--device-memory", "lots"}, tmp_.path());
    QCOMPARE(size.exit_code, 2);
    QVERIFY2(size.err.contains("--device-memory"), qPrintable(size.err));
    const Result key = run_mok({"plan", config_, "--set", "model.layers=two"}, tmp_.path());
    QCOMPARE(key.exit_code, 2);
    QVERIFY2(key.err.contains("model.layers"), qPrintable(key.err));
    QCOMPARE(run_mok({"plan"}, tmp_.path()).exit_code, 2);
  }

  // The shipped quickstart configs, exact and kitten, trained two steps on the corpus sample:
  // the planned saved activations (the kitten policy's steady state) against the tracker's
  // peak, and the planned total against the peak of everything.
  void savedActivationsFollowTheKittenPolicy() {
    const QString dir = QString(MOK_SOURCE_DIR) + "/experiments/";
    struct Case {
      QString config;
      QStringList sets;
    };
    const Case cases[] = {{dir + "quickstart.yaml", {}},
                          {dir + "quickstart.yaml", {"kittens.mode=kitten"}},
                          {dir + "kittens_quickstart.yaml", {}}};
    double kitten_saved = 0.0, exact_saved = 0.0;
    for (const Case& c : cases) {
      QStringList sets = c.sets;
      sets << "train.steps=2" << "train.eval_every=2" << "train.eval_batches=1"
           << "data.corpus=" + tmp_.path() + "/corpus" << "logging.checkpoint_dir=" + tmp_.path() + "/ck";
      QStringList set_args;
      for (const QString& s : sets) set_args << "--set" << s;
      const QString what = QFileInfo(c.config).fileName() + " " + c.sets.join(' ');
      const Result plan = run_mok(QStringList{"plan", c.config, "--json"} + set_args, tmp_.path());
      QCOMPARE(plan.exit_code, 0);
      const Result run =
          run_mok(QStringList{"train", c.config, "--db", tmp_.path() + "/runs.db", "--json", "--quiet"} + set_args,
                  tmp_.path());
      QVERIFY2(run.exit_code == 0, qPrintable(what + ": " + run.err));
      const double planned = plan.json["bytes"].toObject()["saved_activations"].toDouble();
      const double measured = run.json["peak_saved_activation_bytes"].toDouble();
      const double planned_total = plan.json["total_bytes"].toDouble(), peak = run.json["peak_bytes"].toDouble();
      qInfo("%s: saved planned %.2f MiB, measured %.2f MiB (%+.1f %%); total planned %.1f MiB, peak %.1f MiB (%+.1f %%)",
            qPrintable(what), planned / 1048576.0, measured / 1048576.0, 100.0 * (planned - measured) / measured,
            planned_total / 1048576.0, peak / 1048576.0, 100.0 * (planned_total - peak) / peak);
      QVERIFY(measured > 0 && peak > 0);
      // What the allocator held: the tensors' blocks (rounded to size classes), then its cache.
      const double blocks = run.json["peak_block_bytes"].toDouble();
      QVERIFY2(blocks >= peak, qPrintable(what));
      QVERIFY2(run.json["peak_reserved_bytes"].toDouble() >= blocks, qPrintable(what));
      QVERIFY2(std::abs(planned - measured) <= 0.05 * measured, qPrintable(what));
      QVERIFY2(std::abs(planned_total - peak) <= 0.05 * peak, qPrintable(what));
      (c.sets.isEmpty() && c.config.endsWith("/quickstart.yaml") ? exact_saved : kitten_saved) = measured;
    }
    // The kitten figures are not the exact ones relabelled: about a fifth of them.
    QVERIFY(kitten_saved < 0.3 * exact_saved);
  }

  // With an exact warm-up the plan is the steady state and says what the warm-up keeps: every
  // tensor exact, less those a kitten model recomputes from its first step (the norm outputs
  // and their routed copies, the SwiGLU hidden: the steady state's "recompute" kinds).
  void kittenWarmupIsNamed() {
    const Result exact = run_mok({"plan", config_, "--json"}, tmp_.path());
    const QStringList kitten = {"--set", "kittens.mode=kitten", "--set", "kittens.warmup_steps=5"};
    const Result plan = run_mok(QStringList{"plan", config_, "--json"} + kitten, tmp_.path());
    QCOMPARE(plan.exit_code, 0);
    QCOMPARE(plan.json["kitten_warmup_steps"].toInt(), 5);
    const double exact_saved = exact.json["bytes"].toObject()["saved_activations"].toDouble();
    const double warmup = plan.json["warmup_saved_activation_bytes"].toDouble();
    QSet<QString> recomputed;
    for (const QJsonValue& v : plan.json["saved_by_kind"].toArray())
      if (v.toObject()["kept"].toString() == "recompute") recomputed.insert(v.toObject()["kind"].toString());
    QVERIFY(recomputed.contains("attn.qkv.input") && recomputed.contains("moe.expert.down.input"));
    double recomputed_exact = 0.0;
    for (const QJsonValue& v : exact.json["saved_by_kind"].toArray())
      if (recomputed.contains(v.toObject()["kind"].toString())) recomputed_exact += v.toObject()["bytes"].toDouble();
    QVERIFY(recomputed_exact > 0.0);
    QVERIFY2(std::abs(warmup - (exact_saved - recomputed_exact)) <= 1.0,
             qPrintable(QString("warm-up %1, exact %2 less recomputed %3").arg(warmup).arg(exact_saved).arg(recomputed_exact)));
    QVERIFY(plan.json["bytes"].toObject()["saved_activations"].toDouble() < 0.3 * exact_saved);
    QCOMPARE(exact.json["kitten_warmup_steps"].toInt(), 0);
    const Result text = run_mok(QStringList{"plan", config_} + kitten, tmp_.path());
    QVERIFY2(text.out.contains("steady state") && text.out.contains("warm-up"), qPrintable(text.out));
  }

  void ranksSharingAGpuAreNamed() {
    // Peer copies let two ranks share cuda:0: the figures stay per rank, the GPU holds both.
    const QStringList shared = {"--set", "parallel.device=cuda", "--set", "parallel.ranks=2", "--set",
                                "parallel.comm=peer", "--set", "parallel.gpus=0,0"};
    const Result plan = run_mok(QStringList{"plan", config_, "--json"} + shared, tmp_.path());
    QCOMPARE(plan.exit_code, 0);
    QCOMPARE(plan.json["ranks_per_gpu"].toInt(), 2);
    QCOMPARE(plan.json["bytes_per_gpu"].toDouble(), 2.0 * plan.json["total_bytes"].toDouble());
    const Result text = run_mok(QStringList{"plan", config_} + shared, tmp_.path());
    QVERIFY2(text.out.contains("parallel.gpus '0,0' puts 2 ranks on one GPU"), qPrintable(text.out));
    // One rank per GPU: nothing to say.
    const Result apart = run_mok({"plan", config_, "--json", "--set", "parallel.device=cuda", "--set",
                                  "parallel.ranks=2", "--set", "parallel.comm=nccl", "--set", "parallel.gpus=0,1"},
                                 tmp_.path());
    QCOMPARE(apart.exit_code, 0);
    QCOMPARE(apart.json["ranks_per_gpu"].toInt(), 1);
  }

  void planIsWithinFivePercentOfTheMeasuredPeak() {
    for (int batch : {16, 48}) {
      const QString b = QString("train.batch=%1").arg(batch);
      const Result plan = run_mok({"plan", config_, "--json", "--set", b}, tmp_.path());
      const Result run = run_mok({"train", config_, "--db", tmp_.path() + "/runs.db", "--json", "--quiet", "--set", b},
                                 tmp_.path());
      QCOMPARE(run.exit_code, 0);
      const double planned = plan.json["total_bytes"].toDouble(), measured = run.json["peak_bytes"].toDouble();
      qInfo("batch %d: planned %.1f MiB, measured peak %.1f MiB (%+.1f %%)", batch, planned / 1048576.0,
            measured / 1048576.0, 100.0 * (planned - measured) / measured);
      QVERIFY(measured > 0);
      QVERIFY2(std::abs(planned - measured) <= 0.05 * measured, qPrintable(QString("batch %1").arg(batch)));
    }
  }

  // The shipped 7B and 27B presets on 16 and 24 GiB cards, training and generation: every
  // advised option planned again gives the total the advice names and fits when it says so;
  // the card count is the smallest that fits (the divisor of the experts below it does not);
  // where none fits, the most ranks do not fit and the reason says what does not shrink. The
  // 7B's generation fits one card of either size.
  void cardsAndAdviceAgreeWithThePlan() {
    const QString dir = QString(MOK_SOURCE_DIR) + "/experiments/";
    for (const QString& model : QStringList{"mok_7b.yaml", "mok_27b.yaml"}) {
      for (const QString& capacity : QStringList{"16GiB", "24GiB"}) {
        for (const QStringList& mode : {QStringList{}, QStringList{"--generate", "--batch", "8"}}) {
          const QStringList base = QStringList{"plan", dir + model, "--json", "--device-memory", capacity} + mode;
          const QString what = model + " " + capacity + " " + mode.join(' ');
          const Result plan = run_mok(base, tmp_.path());
          if (model == "mok_7b.yaml" && !mode.isEmpty()) {
            // Generation holds 2 bytes a weight on a GPU: the 7B's 7.05e9 weights take 13.1 GiB.
            QVERIFY2(plan.exit_code == 0, qPrintable(what + ": " + plan.err));
            QVERIFY2(plan.json["advice"].toArray().isEmpty(), qPrintable(what));
            QCOMPARE(plan.json["cards"].toObject()["ranks"].toInt(), 1);
            continue;
          }
          QVERIFY2(plan.exit_code == 1, qPrintable(what + ": " + plan.err));  // nothing else fits one card
          const QJsonArray advice = plan.json["advice"].toArray();
          QVERIFY2(!advice.isEmpty(), qPrintable(what));
          bool some_fit = false;
          for (const QJsonValue& v : advice) {
            const QJsonObject o = v.toObject();
            const Result again = run_mok(base + advice_args(o), tmp_.path());
            const QString option = what + " + " + advice_args(o).join(' ');
            QVERIFY2(again.exit_code == (o["fits"].toBool() ? 0 : 1), qPrintable(option + ": " + again.err));
            QVERIFY2(std::abs(again.json["total_bytes"].toDouble() - o["total_bytes"].toDouble()) <= 1.0,
                     qPrintable(option));
            QVERIFY(again.json["total_bytes"].toDouble() < plan.json["total_bytes"].toDouble());
            // A smaller model is advised with the GPU headroom (the presets run on cuda).
            if (advice_args(o).join(' ').contains("model.")) {
              const double card = (capacity == "16GiB" ? 16.0 : 24.0) * 1073741824.0;
              QVERIFY2(o["total_bytes"].toDouble() <= (1.0 - mok::kDeviceAdviceHeadroom) * card, qPrintable(option));
            }
            some_fit = some_fit || o["fits"].toBool();
          }
          QVERIFY2(some_fit, qPrintable(what));

          const QJsonObject cards = plan.json["cards"].toObject();
          const bool generate = !mode.isEmpty();
          const int experts = 64;  // both presets
          auto on_ranks = [&](int r, int batch) {
            return generate ? QStringList{"--ranks", QString::number(r), "--batch", QString::number(batch)}
                            : QStringList{"--set", QString("parallel.ranks=%1").arg(r), "--set",
                                          QString("train.batch=%1").arg(batch)};
          };
          if (cards["ranks"].isNull()) {
            QVERIFY2(cards["reason"].toString().contains("shards only the experts"), qPrintable(what));
            QCOMPARE(cards["largest_ranks"].toInt(), experts);
            QCOMPARE(run_mok(base + on_ranks(experts, cards["batch"].toInt()), tmp_.path()).exit_code, 1);
          } else {
            const int r = cards["ranks"].toInt();
            QVERIFY2(r > 1, qPrintable(what));
            QCOMPARE(run_mok(base + on_ranks(r, cards["batch"].toInt()), tmp_.path()).exit_code, 0);
            int fewer = r - 1;
            while (experts % fewer != 0) --fewer;
            const int batch = (8 + fewer - 1) / fewer * fewer;  // the presets' 8, raised to a multiple
            QCOMPARE(run_mok(base + on_ranks(fewer, batch), tmp_.path()).exit_code, 1);
          }
        }
      }
    }
    // The 7B preset trains on 16 cards of 16 GiB and 8 of 24 GiB; 27B on no number of them,
    // and generates on 8 of 16 GiB or 4 of 24 GiB.
    const auto cards_of = [&](const QString& model, const QString& capacity, const QStringList& mode = {}) {
      return run_mok(QStringList{"plan", dir + model, "--json", "--device-memory", capacity} + mode, tmp_.path())
          .json["cards"]
          .toObject();
    };
    QCOMPARE(cards_of("mok_7b.yaml", "16GiB")["ranks"].toInt(), 16);
    QCOMPARE(cards_of("mok_7b.yaml", "24GiB")["ranks"].toInt(), 8);
    QVERIFY(cards_of("mok_27b.yaml", "24GiB")["ranks"].isNull());
    const QStringList generate = {"--generate", "--batch", "8"};
    QCOMPARE(cards_of("mok_27b.yaml", "16GiB", generate)["ranks"].toInt(), 8);
    QCOMPARE(cards_of("mok_27b.yaml", "24GiB", generate)["ranks"].toInt(), 4);
  }

  // A plan that fits gets no advice and one card; the text names both.
  void aFittingPlanGetsNoAdvice() {
    for (const QStringList& mode : {QStringList{}, QStringList{"--generate", "--batch", "4"}}) {
      const Result r = run_mok(QStringList{"plan", config_, "--json", "--device-memory", "1GiB"} + mode, tmp_.path());
      QCOMPARE(r.exit_code, 0);
      QVERIFY(r.json["advice"].toArray().isEmpty());
      QCOMPARE(r.json["cards"].toObject()["ranks"].toInt(), 1);
      QCOMPARE(r.json["mode"].toString(), mode.isEmpty() ? QString("train") : QString("generate"));
      const Result text = run_mok(QStringList{"plan", config_, "--device-memory", "1GiB"} + mode, tmp_.path());
      QVERIFY2(text.out.contains("cards of 1 GiB: fits on one") && !text.out.contains("to fit"), qPrintable(text.out));
    }
    // Generation flags without --generate, and ranks that do not divide the experts: bad usage.
    QCOMPARE(run_mok({"plan", config_, "--batch", "4"}, tmp_.path()).exit_code, 2);
    const Result ranks = run_mok({"plan", config_, "--generate", "--ranks", "3"}, tmp_.path());
    QCOMPARE(ranks.exit_code, 2);
    QVERIFY2(ranks.err.contains("model.experts"), qPrintable(ranks.err));
  }

  // mok generate from a checkpoint of the quickstart model: its tracker peak (the largest
  // rank's) against `mok plan --generate` with the same sequences, ranks, prompt and tokens.
  void generationPlanIsTheMeasuredPeak() {
    const Result run = run_mok({"train", config_, "--db", tmp_.path() + "/gen.db", "--json", "--quiet"}, tmp_.path());
    QVERIFY2(run.exit_code == 0, qPrintable(run.err));
    const QString checkpoint = run.json["checkpoint"].toString();
    struct Case {
      int batch, ranks, prompt, tokens;
      bool resident;  // MoK, every MoE layer held whole on every rank
    };
    // One rank; a cache that fills and restarts from seq_len/2 tokens; two ranks; two ranks
    // holding every expert.
    for (const Case c : {Case{16, 1, 64, 8, false}, Case{4, 1, 100, 60, false}, Case{8, 2, 64, 8, false},
                         Case{8, 2, 64, 8, true}}) {
      QStringList shape = {"--batch", QString::number(c.batch), "--ranks", QString::number(c.ranks), "--tokens",
                           QString::number(c.tokens)};
      if (c.resident) shape << "--resident-experts" << "all" << "--set" << "routing.dispatcher=mok";
      const Result gen = run_mok(QStringList{"generate", checkpoint, "--prompts-from-data", QString::number(c.prompt),
                                             "--json", "--quiet", "--set", "data.corpus=" + tmp_.path() + "/corpus"} +
                                     shape,
                                 tmp_.path());
      QVERIFY2(gen.exit_code == 0, qPrintable(gen.err));
      const Result plan = run_mok(QStringList{"plan", config_, "--json", "--generate", "--prompt-tokens",
                                              QString::number(c.prompt)} + shape,
                                  tmp_.path());
      QVERIFY2(plan.exit_code == 0, qPrintable(plan.err));
      if (c.resident) {
        QCOMPARE(gen.json["resident_layers"].toInt(), 4);
        QCOMPARE(plan.json["resident_layers"].toInt(), 4);
        QCOMPARE(plan.json["bytes"].toObject()["resident_experts"].toDouble(), gen.json["resident_bytes"].toDouble());
        QVERIFY(!plan.json["bytes"].toObject().contains("communication") ||
                plan.json["bytes"].toObject()["communication"].toDouble() == 0.0);
      }
      // The KV caches the tracker counts are the plan's, byte for byte (one rank's B/R).
      QVERIFY(gen.json["kv_cache_bytes"].toDouble() > 0);
      QCOMPARE(gen.json["kv_cache_bytes"].toDouble(), plan.json["bytes"].toObject()["kv_cache"].toDouble());
      const double measured = gen.json["peak_bytes"].toDouble(), planned = plan.json["total_bytes"].toDouble();
      qInfo("generate B=%d R=%d prompt %d, %d new: planned %.2f MiB, measured %.2f MiB (%+.1f %%)", c.batch, c.ranks,
            c.prompt, c.tokens, planned / 1048576.0, measured / 1048576.0, 100.0 * (planned - measured) / measured);
      QVERIFY(measured > 0);
      // The allocator's live blocks cover the busiest rank's tensors (on the CPU: every rank's).
      QVERIFY2(gen.json["peak_block_bytes"].toDouble() >= measured, qPrintable(shape.join(' ')));
      // and the allocator's reserved peak, its cache included, covers its live blocks.
      QVERIFY2(gen.json["peak_reserved_bytes"].toDouble() >= gen.json["peak_block_bytes"].toDouble(),
               qPrintable(shape.join(' ')));
      // One rank holds what the plan counts (0.0 % measured). Over ranks the busiest rank
      // holds its experts' extra routed rows, which the plan does not model: about 0.7 MiB
      // here (−5.5 %, −3.6 % while gradients were held), so 8 %.
      const double tolerance = c.ranks == 1 ? 0.005 : 0.08;
      QVERIFY2(std::abs(planned - measured) <= tolerance * measured, qPrintable(shape.join(' ')));
    }
  }
};

QTEST_GUILESS_MAIN(TestCliPlan)
#include "test_cli_plan.moc"
