#include "agent_bundle.h"

#include <QCryptographicHash>
#include <QFile>

#include <cstdio>
#include <regex>
#include <sstream>
#include <stdexcept>

#include "shell_quote.h"

namespace flotilla::controller {
namespace {

std::string run_locally(const std::string& command) {
  std::string output;
  if (FILE* pipe = ::popen(command.c_str(), "r")) {
    char buffer[4096];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    ::pclose(pipe);
  }
  return output;
}

}  // namespace

AgentBundle AgentBundle::beside(const std::filesystem::path& agent_binary) {
  AgentBundle bundle;
  const auto dir = agent_binary.parent_path();
  bundle.programs_ = {{"flotilla-agent", agent_binary, {}},
                      {"flotilla-train", dir / "flotilla-train", {}}};
  QCryptographicHash hash(QCryptographicHash::Sha256);
  for (auto& program : bundle.programs_) {
    QFile file(QString::fromStdString(program.path.string()));
    if (!file.open(QIODevice::ReadOnly))
      throw std::runtime_error("the agent bundle needs " + program.path.string() +
                               ", which cannot be read");
    const QByteArray contents = file.readAll();
    if (file.error() != QFileDevice::NoError)
      throw std::runtime_error("cannot read " + program.path.string());
    hash.addData(QByteArray::fromStdString(program.name + '\0'));
    hash.addData(contents);
    program.sha256 =
        QCryptographicHash::hash(contents, QCryptographicHash::Sha256).toHex().toStdString();
  }
  bundle.hash_ = hash.result().toHex().left(16).toStdString();
  return bundle;
}

std::string AgentBundle::checksums() const {
  std::string lines;
  for (const auto& program : programs_) lines += program.sha256 + "  " + program.name + "\n";
  return lines;
}

std::optional<std::filesystem::path> AgentBundle::library(const std::string& soname) const {
  if (!libraries_) {
    libraries_.emplace();
    // "libfoo.so.1 => /usr/lib/x86_64-linux-gnu/libfoo.so.1 (0x...)"
    const std::regex line(R"(^\s*(\S+)\s+=>\s+(/\S+)\s+\(0x[0-9a-f]+\))");
    for (const auto& program : programs_) {
      std::istringstream listing(run_locally("ldd " + shell_quote(program.path.string())));
      std::smatch m;
      for (std::string text; std::getline(listing, text);)
        if (std::regex_search(text, m, line)) libraries_->emplace(m[1], m[2].str());
    }
  }
  const auto it = libraries_->find(soname);
  if (it == libraries_->end()) return std::nullopt;
  return it->second;
}

std::string file_sha256(const std::filesystem::path& file) {
  QFile in(QString::fromStdString(file.string()));
  QCryptographicHash hash(QCryptographicHash::Sha256);
  if (!in.open(QIODevice::ReadOnly) || !hash.addData(&in))
    throw std::runtime_error("cannot read " + file.string());
  return hash.result().toHex().toStdString();
}

std::vector<std::string> missing_libraries(const std::string& ldd_output) {
  std::vector<std::string> missing;
  const std::regex line(R"(^\s*(\S+)\s+=>\s+not found)");
  std::istringstream in(ldd_output);
  std::smatch m;
  for (std::string text; std::getline(in, text);)
    if (std::regex_search(text, m, line)) missing.push_back(m[1]);
  return missing;
}

}  // namespace flotilla::controller
