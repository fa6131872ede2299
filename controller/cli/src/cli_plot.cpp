#include "cli_plot.h"

#include <QProcess>

#include <filesystem>
#include <iostream>

#include "flotilla/controller/paths.h"

namespace flotilla::controller {
namespace {
constexpr int kBadInput = 2;
}

void add_plot_command(CLI::App& app, PlotCommand& plot) {
  plot.command = app.add_subcommand(
      "plot", "draw a dashboard panel of runs to a PNG or SVG file (several runs are overlaid)");
  plot.command->add_option("runs", plot.runs, "run ids")->required();
  plot.command
      ->add_option("--panel", plot.panel,
                   "throughput, step_time, memory, bandwidth, communication, loss or system")
      ->capture_default_str();
  plot.command->add_option("--x", plot.x, "the x axis: step, time (wall clock) or relative")
      ->capture_default_str();
  plot.command->add_option("--smoothing", plot.smoothing, "debiased EMA weight, 0 to 0.99")
      ->capture_default_str();
  plot.command->add_option("--size", plot.size, "WIDTHxHEIGHT in pixels")->capture_default_str();
  plot.command->add_option("-o,--output", plot.output, "the file: .png or .svg")->required();
}

std::optional<int> run_plot_command(Store& store, const PlotCommand& plot) {
  if (!plot.command || !*plot.command) return std::nullopt;
  for (const auto& run : plot.runs)
    if (!store.run(run)) {
      std::cerr << "flotilla: no run \"" << run << "\" in " << store.path().toStdString() << "\n";
      return kBadInput;
    }
  const auto renderer = sibling_program("flotilla-gui");
  if (!std::filesystem::exists(renderer)) {
    std::cerr << "flotilla: plot draws with flotilla-gui, looked for beside flotilla, and there "
                 "is no "
              << renderer.string() << " (build or install flotilla-gui)\n";
    return kBadInput;
  }
  QStringList arguments{"--render",
                        "--db",
                        store.path(),
                        "--panel",
                        QString::fromStdString(plot.panel),
                        "--x",
                        QString::fromStdString(plot.x),
                        "--smoothing",
                        QString::fromStdString(plot.smoothing),
                        "--size",
                        QString::fromStdString(plot.size),
                        "-o",
                        QString::fromStdString(plot.output)};
  for (const auto& run : plot.runs) arguments << "--run" << QString::fromStdString(run);
  QProcess process;
  process.setProcessChannelMode(QProcess::ForwardedChannels);
  process.start(QString::fromStdString(renderer.string()), arguments);
  if (!process.waitForStarted()) {
    std::cerr << "flotilla: cannot start " << renderer.string() << ": "
              << process.errorString().toStdString() << "\n";
    return kBadInput;
  }
  process.waitForFinished(-1);
  if (process.exitStatus() != QProcess::NormalExit) {
    std::cerr << "flotilla: " << renderer.string() << " crashed\n";
    return 1;
  }
  if (process.exitCode() == 0) std::cout << "wrote " << plot.output << "\n";
  return process.exitCode();
}

}  // namespace flotilla::controller
