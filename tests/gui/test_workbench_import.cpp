// File → Import runs from… and File → Open run database…, driven as a user drives them: the
// file dialog picks a store, and the Runs table then shows the runs it should (count and
// names); importing again adds nothing; a foreign, non-SQLite or damaged file gets a message
// box naming it, keeps the current store and its table, and keeps its own bytes.
#include <functional>
#include <set>

#include <QAbstractButton>
#include <QAction>
#include <QMessageBox>
#include <QStatusBar>
#include <QTableView>
#include <QTemporaryDir>
#include <QTimer>
#include <QtTest>

#include <filesystem>
#include <fstream>

#include "core/store/run_store.h"
#include "support/file_contents.h"
#include "support/import_fixture.h"
#include "widgets/models/run_table_model.h"
#include "widgets/workbench/main_window.h"
#include "widgets/workbench/run_manager.h"
#include "widgets/workbench/runs_page.h"

using namespace mok;
using namespace mok::gui;
namespace fs = std::filesystem;

namespace {

// Calls `act` on the next modal dialog once it is open (the test waits for it meanwhile).
void on_next_modal(std::function<void(QWidget*)> act) {
  auto* timer = new QTimer;
  timer->setInterval(20);
  QObject::connect(timer, &QTimer::timeout, [timer, act] {
    QWidget* modal = QApplication::activeModalWidget();
    if (!modal) return;
    timer->stop();
    timer->deleteLater();
    act(modal);
  });
  timer->start();
}

// Answers the window's next "open a file" question with `path`, noting that it was asked.
void choose_next_open_file(MainWindow& window, const QString& path, bool* asked) {
  window.set_open_file_chooser([path, asked](const QString&, const QString&, const QString& filter) {
    *asked = filter.contains("*.db");
    return path;
  });
}

// Closes the next message box and keeps its text in `*text`.
void close_next_message(QString* text) {
  on_next_modal([text](QWidget* modal) {
    if (auto* box = qobject_cast<QMessageBox*>(modal)) *text = box->text();
    modal->close();
  });
}

// The names the Runs table shows (what the user sees: the filtered, sorted view).
std::multiset<QString> shown_names(MainWindow& window) {
  QAbstractItemModel* view = window.runs_page()->table()->model();
  std::multiset<QString> names;
  for (int r = 0; r < view->rowCount(); ++r) names.insert(view->index(r, RunTableModel::Name).data().toString());
  return names;
}

}  // namespace

class TestWorkbenchImport : public QObject {
  Q_OBJECT
  QTemporaryDir dir_;
  QString cluster_, home_;

  QString path(const QString& name) const { return dir_.filePath(name); }

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    cluster_ = path("cluster.db");
    {
      RunStore store = RunStore::open(cluster_.toStdString());
      mok::test::add_finished_run(store, "alpha", 10);
      mok::test::add_finished_run(store, "beta", 10);
    }
  }

  void init() {
    // A home store with one run of its own, fresh for each case.
    home_ = path(QString("home-%1.db").arg(QTest::currentTestFunction()));
    RunStore store = RunStore::open(home_.toStdString());
    mok::test::add_finished_run(store, "local", 4);
  }

  void import_through_the_menu_shows_the_new_runs_once() {
    MainWindow window(home_);
    window.show();
    window.show_page(MainWindow::RunsPageIndex);
    QCOMPARE(shown_names(window), std::multiset<QString>{"local"});
    const QByteArray cluster_bytes = mok::test::sha256_of(cluster_.toStdString());

    bool dialog_seen = false;
    choose_next_open_file(window, cluster_, &dialog_seen);
    window.import_runs_action()->trigger();
    QVERIFY(dialog_seen);
    QCOMPARE(shown_names(window), (std::multiset<QString>{"local", "alpha", "beta"}));
    QVERIFY2(window.statusBar()->currentMessage().contains("Imported 2 runs from cluster.db"),
             qPrintable(window.statusBar()->currentMessage()));
    QCOMPARE(window.run_manager()->db_path(), home_);  // imported into, not switched to

    // Again: nothing new, and the status bar says why.
    QVERIFY(window.import_runs_from(cluster_));
    QCOMPARE(shown_names(window), (std::multiset<QString>{"local", "alpha", "beta"}));
    const QString again = window.statusBar()->currentMessage();
    QVERIFY2(again.contains("Imported 0 runs") && again.contains("2 already here"), qPrintable(again));
    QCOMPARE(mok::test::sha256_of(cluster_.toStdString()), cluster_bytes);
    QCOMPARE(RunStore::open_snapshot(home_.toStdString()).list_runs().size(), size_t(3));
  }

  void a_refused_import_says_why_and_changes_nothing() {
    MainWindow window(home_);
    window.show();
    window.show_page(MainWindow::RunsPageIndex);
    const QString notes = path("notes.db");
    std::ofstream(notes.toStdString()) << "not a database\n";
    const QByteArray before = mok::test::sha256_of(notes.toStdString());
    QString shown;
    close_next_message(&shown);
    QVERIFY(!window.import_runs_from(notes));
    QVERIFY2(shown.contains(notes) && shown.contains("not an SQLite database") && shown.contains("Nothing was imported"),
             qPrintable(shown));
    QCOMPARE(shown_names(window), std::multiset<QString>{"local"});
    QCOMPARE(mok::test::sha256_of(notes.toStdString()), before);
  }

  void open_database_switches_stores_and_refuses_bad_files() {
    MainWindow window(home_);
    window.show();
    window.show_page(MainWindow::RunsPageIndex);
    QCOMPARE(shown_names(window), std::multiset<QString>{"local"});

    // A damaged copy of the cluster's store (a page of metric rows overwritten).
    const QString damaged = path("damaged.db");
    std::string bytes = mok::test::read_all(cluster_.toStdString());
    const size_t pages = bytes.size() / 4096;
    QVERIFY(pages > 8);
    std::fill(bytes.begin() + long(pages * 3 / 4 * 4096), bytes.begin() + long((pages * 3 / 4 + 1) * 4096), '\xff');
    std::ofstream(damaged.toStdString(), std::ios::binary) << bytes;
    const QString foreign = path("foreign.db");
    {
      sqlite3* db = nullptr;
      QCOMPARE(sqlite3_open(foreign.toUtf8().constData(), &db), SQLITE_OK);
      QCOMPARE(sqlite3_exec(db, "CREATE TABLE items(id INTEGER PRIMARY KEY)", nullptr, nullptr, nullptr), SQLITE_OK);
      sqlite3_close(db);
    }
    for (const auto& [file, says] : {std::pair{damaged, "is damaged"}, std::pair{foreign, "not a MoK run store"}}) {
      const QByteArray before = mok::test::sha256_of(file.toStdString());
      QString shown;
      close_next_message(&shown);
      QVERIFY(!window.open_database(file));
      QVERIFY2(shown.contains(file) && shown.contains(says) && shown.contains(home_), qPrintable(shown));
      QCOMPARE(window.run_manager()->db_path(), home_);
      QCOMPARE(shown_names(window), std::multiset<QString>{"local"});
      QCOMPARE(mok::test::sha256_of(file.toStdString()), before);
    }

    // Through the menu: the cluster's store, then back home.
    bool dialog_seen = false;
    choose_next_open_file(window, cluster_, &dialog_seen);
    window.open_database_action()->trigger();
    QVERIFY(dialog_seen);
    QCOMPARE(window.run_manager()->db_path(), cluster_);
    QCOMPARE(shown_names(window), (std::multiset<QString>{"alpha", "beta"}));
    QVERIFY(window.windowTitle().contains(cluster_));
    QVERIFY(window.open_database(home_));
    QCOMPARE(shown_names(window), std::multiset<QString>{"local"});
  }
};

QTEST_MAIN(TestWorkbenchImport)
#include "test_workbench_import.moc"
