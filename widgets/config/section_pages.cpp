#include "widgets/config/section_pages.h"

#include <algorithm>

#include <QFontMetrics>
#include <QHBoxLayout>
#include <QListWidget>
#include <QStackedWidget>

namespace mok::gui {

SectionPages::SectionPages(QWidget* parent) : QWidget(parent) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  list_ = new QListWidget;
  list_->setSelectionMode(QAbstractItemView::SingleSelection);
  list_->setSpacing(2);  // rows a little apart: a list to choose from, not a table
  list_->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  list_->setSizePolicy(QSizePolicy::Fixed, QSizePolicy::Expanding);
  stack_ = new QStackedWidget;
  layout->addWidget(list_);
  layout->addWidget(stack_, 1);
  connect(list_, &QListWidget::currentRowChanged, stack_, &QStackedWidget::setCurrentIndex);
}

void SectionPages::add_page(const QString& name, QWidget* page) {
  stack_->addWidget(page);
  list_->addItem(name);
  if (list_->count() == 1) list_->setCurrentRow(0);
  fit_list_width();
}

void SectionPages::fit_list_width() {
  const QFontMetrics metrics(list_->font());
  int widest = 0;
  for (int i = 0; i < list_->count(); ++i) widest = std::max(widest, metrics.horizontalAdvance(list_->item(i)->text()));
  // The text, the item's padding on both sides, and the frame.
  list_->setFixedWidth(widest + 4 * metrics.averageCharWidth() + 2 * list_->frameWidth());
}

int SectionPages::count() const { return stack_->count(); }
QString SectionPages::name(int index) const { return list_->item(index) ? list_->item(index)->text() : QString(); }
int SectionPages::current_index() const { return stack_->currentIndex(); }
void SectionPages::set_current_index(int index) { list_->setCurrentRow(index); }

bool SectionPages::show_page_of(const QWidget* widget) {
  for (int i = 0; i < stack_->count(); ++i)
    if (stack_->widget(i)->isAncestorOf(widget)) {
      set_current_index(i);
      return true;
    }
  return false;
}

}  // namespace mok::gui
