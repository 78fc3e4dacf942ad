#include "gui/widgets/tune_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

namespace ddpscope::gui {

TunePanel::TunePanel(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  m_header = new QLabel(tr("No tune report open. File ▸ Open tune report… opens one written by "
                           "ddpscope.torch.tune(report=...)."),
                        this);
  m_header->setWordWrap(true);
  m_header->setObjectName("tuneHeader");
  m_table = new QTableWidget(0, 8, this);
  m_table->setObjectName("tuneTable");
  m_table->setHorizontalHeaderLabels({tr("candidate"), tr("buckets"), tr("predicted ms"),
                                      tr("measured ms"), tr("gain %"), tr("rounds won"), tr("p"),
                                      tr("")});
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_decision = new QLabel(this);
  m_decision->setWordWrap(true);
  m_decision->setObjectName("tuneDecision");
  m_decision->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(m_header);
  layout->addWidget(m_table, 1);
  layout->addWidget(m_decision);
}

std::optional<QString> TunePanel::openReport(const QString& path) {
  StatusOr<api::TuneReport> report = api::readTuneReport(path.toStdString());
  if (!report.isOk()) return QString::fromStdString(report.status().message());
  showReport(path, *report);
  return std::nullopt;
}

void TunePanel::showReport(const QString& path, const api::TuneReport& r) {
  m_header->setText(tr("%1: %2, world size %3, %4 on %5, torch %6; steps timed by %7.\n%8")
                        .arg(path, QString::fromStdString(r.model))
                        .arg(r.worldSize)
                        .arg(QString::fromStdString(r.backend), QString::fromStdString(r.device),
                             QString::fromStdString(r.torch), QString::fromStdString(r.timing),
                             QString::fromStdString(r.prediction)));
  m_table->setRowCount(static_cast<int>(r.candidates.size()));
  for (int i = 0; i < static_cast<int>(r.candidates.size()); ++i) {
    const api::TuneReportCandidate& c = r.candidates[static_cast<size_t>(i)];
    auto set = [&](int column, const QString& text) {
      auto* item = new QTableWidgetItem(text);
      if (c.chosen) {
        QFont font = item->font();
        font.setBold(true);
        item->setFont(font);
      }
      m_table->setItem(i, column, item);
    };
    set(0, QString::fromStdString(c.label));
    set(1, c.buckets ? QString::number(*c.buckets) : QStringLiteral("–"));
    set(2, c.predictedMs ? QString::number(*c.predictedMs, 'f', 2) : QStringLiteral("–"));
    set(3, QString::number(c.measuredMs, 'f', 2));
    set(4, c.current ? QStringLiteral("–") : QString::number(c.gainPercent, 'f', 1));
    set(5, c.current ? QStringLiteral("–")
                     : QStringLiteral("%1 of %2").arg(c.roundsFaster).arg(r.rounds));
    set(6, c.current ? QStringLiteral("–") : QString::number(c.pValue, 'f', 4));
    QString status = c.current ? tr("current") : (c.eligible ? tr("eligible") : QString());
    if (c.chosen) status += status.isEmpty() ? tr("chosen") : tr(", chosen");
    set(7, status);
  }
  m_decision->setText(tr("Decision: %1\nTest: %2, alpha %3; noise floor %4 %.\nCost: %5 training "
                         "steps, %6 s.\nNext time: %7")
                          .arg(QString::fromStdString(r.reason), QString::fromStdString(r.test))
                          .arg(r.alpha)
                          .arg(r.noiseFloorPercent, 0, 'f', 1)
                          .arg(r.stepsTotal)
                          .arg(r.seconds, 0, 'f', 1)
                          .arg(QString::fromStdString(r.paste)));
}

}  // namespace ddpscope::gui
