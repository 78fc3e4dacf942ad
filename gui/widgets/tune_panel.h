// TunePanel: the "Tuning" tab of ddpscope-gui: a report ddpscope.torch.tune wrote in a training
// job (api/tune_report.h reads and checks it), as `ddpscope tune-report` prints it: the job,
// every candidate layout with its predicted and measured step, DDP's bucket count, its gain over
// the current settings, the rounds it won and the sign test's p-value, then the decision, the
// test, the cost and the DDP call to paste.
#pragma once

#include <QString>
#include <QWidget>
#include <optional>

#include "api/tune_report.h"

class QLabel;
class QTableWidget;

namespace ddpscope::gui {

class TunePanel : public QWidget {
  Q_OBJECT
 public:
  explicit TunePanel(QWidget* parent = nullptr);

  // Reads and shows the report at `path`; on an error returns the reader's message (the file and
  // field named) and keeps what was shown.
  std::optional<QString> openReport(const QString& path);
  void showReport(const QString& path, const api::TuneReport& report);

  QTableWidget* table() const { return m_table; }
  QLabel* header() const { return m_header; }
  QLabel* decision() const { return m_decision; }

 private:
  QLabel* m_header;
  QTableWidget* m_table;
  QLabel* m_decision;
};

}  // namespace ddpscope::gui
