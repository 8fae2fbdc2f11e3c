// What is typed into the Setup page is kept as typed and judged, never quietly changed: a
// negative step count is flagged, not made positive; text that is not a number leaves the
// YAML saying it is not in step; typing reaches the YAML without leaving the field; a
// launch that cannot happen says why; settings that make little sense together warn; the
// preset box shows a preset only while the editor holds it; the last config comes back.
#include <QAction>
#include <QComboBox>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSettings>
#include <QTemporaryDir>
#include <QtTest>

#include "core/config/config_io.h"
#include "widgets/config/config_field.h"
#include "widgets/config/config_warnings.h"
#include "widgets/config/experiment_editor.h"
#include "widgets/workbench/main_window.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/setup_page.h"

using namespace mok;
using namespace mok::gui;

namespace {

QLineEdit* line_of(ExperimentEditor& editor, const QString& path) {
  ConfigField* f = editor.field(path);
  return f ? qobject_cast<QLineEdit*>(f->editor()) : nullptr;
}

// Types `text` into the field as a user would: focus, select all, keys; no Tab, no Return.
void type_text(QLineEdit* line, const QString& text) {
  line->setFocus();
  line->selectAll();
  QTest::keyClicks(line, text);
}

}  // namespace

class TestEditorInput : public QObject {
  Q_OBJECT

 private slots:
  void a_negative_step_count_is_flagged_and_kept_as_typed() {
    ExperimentEditor editor;
    editor.show();
    QLineEdit* steps = line_of(editor, "train.steps");
    QVERIFY(steps);
    type_text(steps, "-5");
    QCOMPARE(steps->text(), QStringLiteral("-5"));  // nothing dropped from what was typed
    QTRY_VERIFY(!editor.field("train.steps")->issue().isEmpty());
    QVERIFY(!editor.is_valid());
    QCOMPARE(steps->text(), QStringLiteral("-5"));
    QVERIFY(editor.config().train.steps != 5);  // never turned into something else
  }

  void typing_reaches_the_yaml_without_leaving_the_field() {
    ExperimentEditor editor;
    editor.show();
    QLineEdit* lr = line_of(editor, "train.lr");
    QSignalSpy finished(lr, &QLineEdit::editingFinished);
    type_text(lr, "0.0007");
    QTRY_COMPARE(parse_experiment_config(editor.yaml_text().toStdString(), "view.yaml").train.lr, 0.0007);
    QCOMPARE(finished.count(), 0);  // no Tab, no Return: the pause in typing applied it
    QCOMPARE(editor.config().train.lr, 0.0007);
  }

  void text_that_is_not_a_number_leaves_the_yaml_out_of_step_and_says_so() {
    ExperimentEditor editor;
    editor.show();
    const QString yaml_before = editor.yaml_text();
    type_text(line_of(editor, "train.lr"), "abc");
    QTRY_VERIFY(!editor.field("train.lr")->issue().isEmpty());
    QCOMPARE(line_of(editor, "train.lr")->text(), QStringLiteral("abc"));
    QCOMPARE(editor.yaml_text(), yaml_before);  // the last valid value
    const QString status = editor.yaml_status()->text();
    QVERIFY2(!status.contains(">in step with the form"), qPrintable(status));
    QVERIFY2(status.contains("Not in step") && status.contains("train.lr"), qPrintable(status));
  }

  void error_messages_name_the_key_once() {
    ExperimentEditor editor;
    QString error;
    QVERIFY(!editor.apply_yaml_text("name: x\nseed: 1\nbogus_key: 3\n", &error));
    QVERIFY(!editor.issues().isEmpty());
    for (const QString& issue : editor.issues())
      QVERIFY2(issue.count("bogus_key") <= 1, qPrintable(issue));
    QVERIFY(editor.issues().join(" ").contains("bogus_key"));
    // A form edit that fails names its key once too.
    QVERIFY(editor.apply_yaml_text(QString::fromStdString(experiment_config_to_yaml(ExperimentConfig{}))));
    QVERIFY(!editor.edit_field("train.lr", "abc"));
    for (const QString& issue : editor.issues())
      QVERIFY2(issue.count("train.lr") == 1, qPrintable(issue));
  }

  void launch_is_off_for_an_invalid_config_and_says_why() {
    QTemporaryDir dir;
    MainWindow window(dir.filePath("runs.db"));
    ExperimentEditor* editor = window.setup_page()->editor();
    QVERIFY(window.launch_action()->isEnabled() == window.setup_page()->can_launch());
    editor->edit_field("model.experts", "4");
    editor->edit_field("model.top_k", "6");
    QVERIFY(!editor->is_valid());
    QVERIFY(!window.launch_action()->isEnabled());
    QVERIFY(!window.setup_page()->launch_button()->isEnabled());
    QSignalSpy added(window.run_manager(), &RunManager::job_added);
    QCOMPARE(window.setup_page()->launch(), 0);  // as the shortcut would, were it enabled
    QCOMPARE(added.count(), 0);
    const QString status = window.setup_page()->status_label()->text();
    QVERIFY2(status.contains("Not launched") && status.contains("model.top_k"), qPrintable(status));
    editor->edit_field("model.top_k", "2");
    QCOMPARE(window.launch_action()->isEnabled(), RunManager::training_available());
  }

  void settings_that_do_not_fit_together_warn_without_blocking() {
    ExperimentEditor editor;
    editor.edit_field("train.steps", "40");
    editor.edit_field("train.warmup_steps", "50");
    editor.edit_field("train.eval_every", "50");
    QVERIFY2(editor.is_valid(), qPrintable(editor.issues().join("; ")));  // a warning, not a problem
    const QString warnings = editor.warnings().join("\n");
    QVERIFY2(warnings.contains("train.warmup_steps") && warnings.contains("never reached"), qPrintable(warnings));
    QVERIFY2(warnings.contains("train.eval_every") && warnings.contains("final"), qPrintable(warnings));
    QVERIFY(!editor.field("train.warmup_steps")->warning().isEmpty());
    QVERIFY(editor.field("train.warmup_steps")->issue().isEmpty());
    const QString first = editor.issue_list()->item(0)->text();
    QVERIFY2(!first.contains("No problems"), qPrintable(first));
    QVERIFY2(first.contains("2 warning"), qPrintable(first));
    editor.edit_field("train.steps", "400");
    QVERIFY(editor.warnings().isEmpty());
    QVERIFY(editor.field("train.warmup_steps")->warning().isEmpty());
    QVERIFY(editor.issue_list()->item(0)->text().contains("No problems"));
    ExperimentConfig kitten;
    kitten.train.steps = 40;
    kitten.train.warmup_steps = 5;
    kitten.train.eval_every = 10;
    kitten.kittens.mode = "kitten";
    kitten.kittens.warmup_steps = 40;
    QCOMPARE(int(config_warnings(kitten).size()), 1);
    QCOMPARE(QString::fromStdString(config_warnings(kitten).front().key_path), QStringLiteral("kittens.warmup_steps"));
  }

  void preset_box_shows_only_what_the_editor_holds() {
    ExperimentEditor editor;
    QComboBox* box = editor.preset_box();
    QCOMPARE(box->currentIndex(), -1);  // defaults, not the first preset of the list
    QVERIFY(box->placeholderText().contains("defaults"));
    QVERIFY(editor.load_preset("quickstart"));
    QCOMPARE(box->currentText(), QStringLiteral("quickstart"));
    editor.edit_field("train.steps", "41");
    QCOMPARE(box->currentIndex(), -1);
    QCOMPARE(box->placeholderText(), QStringLiteral("quickstart, edited"));
    // Back to the preset's own value: the box shows the preset again.
    const QString steps = QString::number(load_experiment_config(QStringLiteral(MOK_SOURCE_DIR "/experiments/quickstart.yaml").toStdString()).train.steps);
    editor.edit_field("train.steps", steps);
    QCOMPARE(box->currentText(), QStringLiteral("quickstart"));
    // Choosing a preset in the box loads it: box and editor agree at once.
    const int other = box->findText("mok_kitten");
    QVERIFY(other >= 0);
    box->setCurrentIndex(other);
    emit box->activated(other);
    QCOMPARE(editor.config().name, load_experiment_config(box->itemData(other).toString().toStdString()).name);
    QCOMPARE(box->currentText(), QStringLiteral("mok_kitten"));
  }

  void the_last_setup_config_comes_back() {
    QTemporaryDir dir;
    QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, dir.filePath("settings"));
    QCoreApplication::setOrganizationName("mok-test");  // settings are kept for a named application
    {
      MainWindow window(dir.filePath("runs.db"));
      ExperimentEditor* editor = window.setup_page()->editor();
      editor->edit_field("name", "kept across sessions");
      type_text(line_of(*editor, "train.steps"), "123");
      QTRY_COMPARE(editor->config().train.steps, 123);
    }
    {
      MainWindow window(dir.filePath("runs.db"));
      ExperimentEditor* editor = window.setup_page()->editor();
      QCOMPARE(editor->config().name, std::string("kept across sessions"));
      QCOMPARE(editor->config().train.steps, 123);
      QCOMPARE(editor->preset_box()->currentIndex(), -1);
      QVERIFY(editor->preset_box()->placeholderText().contains("last session"));
    }
    QSettings().remove(SetupPage::kLastConfigKey);
    QCoreApplication::setOrganizationName(QString());
  }
};

QTEST_MAIN(TestEditorInput)
#include "test_editor_input.moc"
