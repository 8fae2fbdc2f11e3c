// The experiment editor: form and YAML stay in step both ways, validation lands on the
// offending field (and activating a problem shows the field's section), presets load, the
// schedule plot and memory estimate follow the config, every section's name is in view.
#include <QListWidget>
#include <QPlainTextEdit>
#include <QtTest>

#include <cmath>

#include <qcustomplot.h>

#include "core/config/config_io.h"
#include "widgets/config/config_field.h"
#include "widgets/config/experiment_editor.h"
#include "core/plan/memory_plan.h"
#include "widgets/config/memory_estimate_bar.h"
#include "widgets/config/rank_schedule_editor.h"
#include "widgets/config/routing_policy_editor.h"
#include "widgets/config/section_pages.h"

using namespace mok;
using namespace mok::gui;

class TestExperimentEditor : public QObject {
  Q_OBJECT

 private slots:
  void every_key_has_a_field_and_round_trips() {
    ExperimentEditor editor;
    for (const ConfigKeySpec& spec : experiment_config_schema()) {
      if (spec.in_map()) continue;
      QVERIFY2(editor.field(QString::fromStdString(spec.path)), spec.path.c_str());
    }
    QCOMPARE(editor.yaml_text().toStdString(), experiment_config_to_yaml(ExperimentConfig{}));
    // Form → config → YAML → parse: the same config.
    QVERIFY(editor.edit_field("model.d_model", "64"));
    QVERIFY(editor.edit_field("name", "tiny run"));
    QVERIFY(editor.edit_field("train.lr", "0.001"));
    QVERIFY(editor.edit_field("routing.dispatcher", "mok"));
    QVERIFY(editor.edit_field("model.tie_embeddings", "false"));
    QCOMPARE(editor.config().model.d_model, 64);
    QCOMPARE(editor.config().name, std::string("tiny run"));
    QCOMPARE(editor.config().routing.dispatcher, std::string("mok"));
    QVERIFY(!editor.config().model.tie_embeddings);
    ExperimentConfig back = parse_experiment_config(editor.yaml_text().toStdString(), "t.yaml");
    QCOMPARE(experiment_config_to_yaml(back), experiment_config_to_yaml(editor.config()));
    QVERIFY(editor.yaml_text().contains("d_model: 64"));
    // The routing editor shows the same key.
    bool seen = false;
    for (ConfigField* f : editor.routing_editor()->fields())
      if (f->path() == "routing.dispatcher") {
        seen = true;
        QCOMPARE(f->value_text(), QStringLiteral("mok"));
      }
    QVERIFY(seen);
  }

  void yaml_edits_reach_the_form() {
    ExperimentEditor editor;
    ExperimentConfig c;
    c.model.layers = 3;
    c.train.steps = 77;
    c.kittens.mode = "kitten";
    QString error;
    QVERIFY2(editor.apply_yaml_text(QString::fromStdString(experiment_config_to_yaml(c)), &error), qPrintable(error));
    QCOMPARE(editor.field("model.layers")->value_text(), QStringLiteral("3"));
    QCOMPARE(editor.field("train.steps")->value_text(), QStringLiteral("77"));
    QCOMPARE(editor.field("kittens.mode")->value_text(), QStringLiteral("kitten"));
    QCOMPARE(editor.config().train.steps, 77);

    // Typing in the YAML view applies after the debounce, not per keystroke.
    QSignalSpy changed(&editor, &ExperimentEditor::config_changed);
    QString text = editor.yaml_text();
    text.replace("steps: 77", "steps: 88");
    editor.yaml_view()->setPlainText(text);
    QCOMPARE(editor.config().train.steps, 77);
    QTRY_COMPARE(editor.config().train.steps, 88);
    QCOMPARE(changed.count(), 1);
    QCOMPARE(editor.field("train.steps")->value_text(), QStringLiteral("88"));

    // A syntax error is reported with file:line:column; the config is kept.
    QVERIFY(!editor.apply_yaml_text("model: {layers: 2\n", &error));
    QVERIFY2(error.startsWith("editor.yaml:"), qPrintable(error));
    QCOMPARE(editor.config().train.steps, 88);
    QVERIFY(!editor.is_valid());
    // A key error names the key and lands on its field.
    QVERIFY(!editor.apply_yaml_text("model: {top_k: 0}\n", &error));
    QVERIFY2(error.contains("model.top_k"), qPrintable(error));
    QVERIFY(!editor.field("model.top_k")->issue().isEmpty());
  }

  void validation_highlights_the_field() {
    ExperimentEditor editor;
    QVERIFY(editor.is_valid());
    QSignalSpy validity(&editor, &ExperimentEditor::validity_changed);
    editor.edit_field("model.experts", "4");
    editor.edit_field("model.top_k", "6");  // more than the experts
    QVERIFY(!editor.is_valid());
    QVERIFY2(!editor.field("model.top_k")->issue().isEmpty(), qPrintable(editor.issues().join("; ")));
    QVERIFY(editor.issues().join(" ").contains("model.top_k"));
    QCOMPARE(validity.count(), 1);
    editor.edit_field("model.top_k", "2");
    QVERIFY(editor.is_valid());
    QVERIFY(editor.field("model.top_k")->issue().isEmpty());

    // Text that is not a number: the field says so and the config keeps its value.
    const double lr = editor.config().train.lr;
    QVERIFY(!editor.edit_field("train.lr", "fast"));
    QCOMPARE(editor.config().train.lr, lr);
    QVERIFY(!editor.field("train.lr")->issue().isEmpty());
    QVERIFY(!editor.is_valid());
    QVERIFY(editor.edit_field("train.lr", "0.002"));
    QVERIFY(editor.is_valid());
  }

  // At the workbench's screenshot size every section name is whole in its list, and
  // activating a problem in the list shows the section of the field it names.
  void every_section_is_in_view_and_problems_lead_to_theirs() {
    ExperimentEditor editor;
    editor.resize(1380, 820);
    editor.show();
    QVERIFY(QTest::qWaitForWindowExposed(&editor));
    auto* sections = editor.findChild<SectionPages*>();
    QVERIFY(sections);
    QStringList names;
    for (int i = 0; i < sections->count(); ++i) names << sections->name(i);
    for (const char* expected : {"general", "data", "model", "train", "kittens", "routing", "parallel", "logging"})
      QVERIFY2(names.contains(expected), qPrintable(names.join(", ")));
    const QRect viewport = sections->list()->viewport()->rect();
    const QFontMetrics metrics(sections->list()->font());
    for (int i = 0; i < sections->count(); ++i) {
      const QRect item = sections->list()->visualItemRect(sections->list()->item(i));
      QVERIFY2(viewport.contains(item), qPrintable(names[i] + " is outside the list's view"));
      QVERIFY2(item.width() >= metrics.horizontalAdvance(names[i]), qPrintable(names[i] + " is cut"));
    }
    // A problem on a field of another section: activating it shows that section.
    QCOMPARE(sections->current_index(), 0);
    editor.edit_field("model.experts", "4");
    editor.edit_field("model.top_k", "6");
    QListWidget* problems = nullptr;
    for (QListWidget* list : editor.findChildren<QListWidget*>())
      if (list != sections->list()) problems = list;
    QVERIFY(problems && problems->count() > 0);
    QListWidgetItem* top_k = nullptr;
    for (int i = 0; i < problems->count(); ++i)
      if (problems->item(i)->text().contains("model.top_k")) top_k = problems->item(i);
    QVERIFY(top_k);
    emit problems->itemActivated(top_k);
    QCOMPARE(sections->name(sections->current_index()), QString("model"));
    QVERIFY(sections->show_page_of(editor.field("train.lr")));
    QCOMPARE(sections->name(sections->current_index()), QString("train"));
    QVERIFY(!sections->show_page_of(sections));  // not on any page
  }

  void presets_load() {
    ExperimentEditor editor;
    QVERIFY(editor.preset_names().contains("quickstart"));
    QString error;
    QVERIFY2(editor.load_preset("quickstart", &error), qPrintable(error));
    QCOMPARE(editor.config().name, std::string("quickstart"));
    QVERIFY(!editor.load_preset("/no/such/file.yaml", &error));
    QVERIFY(!error.isEmpty());
    QCOMPARE(editor.config().name, std::string("quickstart"));
  }

  void schedule_and_memory_follow_the_config() {
    ExperimentEditor editor;
    editor.edit_field("kittens.mode", "kitten");
    editor.edit_field("kittens.max_rank", "64");
    editor.edit_field("kittens.rank", "32");
    editor.edit_field("kittens.min_rank", "4");
    editor.edit_field("kittens.schedule", "linear");
    QVERIFY2(editor.is_valid(), qPrintable(editor.issues().join("; ")));
    QVERIFY(editor.schedule_editor()->drawn_points() > 10);
    QCOMPARE(editor.schedule_editor()->drawn_rank_at_end(), 4);
    editor.edit_field("kittens.schedule", "constant");
    QCOMPARE(editor.schedule_editor()->drawn_rank_at_end(), 32);

    ExperimentConfig exact;
    ExperimentConfig kitten = exact;
    kitten.kittens.mode = "kitten";
    kitten.kittens.rank = 8;
    const MemoryEstimate a = estimate_memory(exact), b = estimate_memory(kitten);
    // The kitten defaults (4-bit linear inputs, 8-bit elementwise tensors, recomputed norm
    // outputs; the rank does not enter) keep about a fifth: 21.9 % on this shape.
    QVERIFY(b.bytes_of("saved_activations") < 0.25 * a.bytes_of("saved_activations"));
    QVERIFY(b.bytes_of("saved_activations") > 0.15 * a.bytes_of("saved_activations"));
    QCOMPARE(b.bytes_of("parameters"), a.bytes_of("parameters"));
    ExperimentConfig two_ranks = exact;
    two_ranks.parallel.ranks = 2;
    QVERIFY(estimate_memory(two_ranks).device_parameter_count < a.device_parameter_count);
    QCOMPARE(estimate_memory(two_ranks).parameter_count, a.parameter_count);
    QVERIFY(editor.memory_bar()->estimate().total_bytes() > 0.0);
  }

  // Below the bar, where the saved activations go: the largest kinds by name with how each is
  // kept, their bytes summing to the bar's saved activations; in kitten mode the norm outputs
  // are listed as recomputed in the tooltip and not named as taking bytes.
  void memoryBarNamesWhereTheSavedActivationsGo() {
    MemoryEstimateBar bar;
    ExperimentConfig kitten;
    kitten.kittens.mode = "kitten";
    bar.show_config(kitten, 0.0);
    double sum = 0.0;
    for (const SavedKindBytes& k : bar.estimate().saved_by_kind) sum += k.bytes;
    QVERIFY(std::abs(sum - bar.estimate().bytes_of("saved_activations")) <= 1.0);
    const SavedKindBytes& largest = bar.estimate().saved_by_kind.front();
    QVERIFY(largest.bytes > 0.0);
    const QString summary = bar.saved_summary();
    QVERIFY2(summary.startsWith("Saved activations: " + QString::fromStdString(largest.kind) + " ") &&
                 summary.contains("(" + QString::fromStdString(largest.kept) + ")"),
             qPrintable(summary));
    QVERIFY2(!summary.contains("recompute"), qPrintable(summary));
    QVERIFY2(bar.plot()->toolTip().contains("attn.qkv.input</td><td>recompute"), qPrintable(bar.plot()->toolTip()));
    // exact keeping names its largest kind as exact
    bar.show_config(ExperimentConfig{}, 0.0);
    QVERIFY2(bar.saved_summary().contains("(exact)"), qPrintable(bar.saved_summary()));
  }
};

QTEST_MAIN(TestExperimentEditor)
#include "test_experiment_editor.moc"
