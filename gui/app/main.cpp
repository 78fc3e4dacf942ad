// ddpscope-gui: thin main(); the application lives in gui/widgets (runGuiApp).
#include <QApplication>

#include "gui/widgets/app_main.h"

int main(int argc, char** argv) {
  QApplication app(argc, argv);
  QApplication::setOrganizationName("ddpscope");
  QApplication::setApplicationName("ddpscope-gui");
  return ddpscope::gui::runGuiApp(QApplication::arguments());
}
