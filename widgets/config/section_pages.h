#pragma once
// SectionPages: named pages with their names in a list beside them, every name in view at
// once (a settings dialog's layout). A tab bar of the config's sections (general, data,
// model, train, kittens, routing, parallel, logging) is wider than the form beside the YAML
// and hides its last names behind scroll arrows; a list grows downwards, where the form has
// room. The list is as wide as its longest name.

#include <QString>
#include <QWidget>

class QListWidget;
class QStackedWidget;

namespace mok::gui {

class SectionPages : public QWidget {
  Q_OBJECT
 public:
  explicit SectionPages(QWidget* parent = nullptr);

  // Adds `page` (taking ownership) under `name`; the first page added is shown.
  void add_page(const QString& name, QWidget* page);
  int count() const;
  QString name(int index) const;
  int current_index() const;
  void set_current_index(int index);
  // Shows the page holding `widget` (at any depth); false when no page holds it.
  bool show_page_of(const QWidget* widget);

  QListWidget* list() const { return list_; }

 private:
  void fit_list_width();

  QListWidget* list_ = nullptr;
  QStackedWidget* stack_ = nullptr;
};

}  // namespace mok::gui
