#include "cli/arg_parser.h"

#include <algorithm>
#include <ostream>
#include <sstream>

#include "base/check.h"
#include "base/strings.h"

namespace ddpscope::cli {

namespace {

// Flags every command renamed in one step (the one grammar: --torch-version for the PyTorch
// version, --model and --cluster take a name or a file, -o is always --out).
constexpr std::pair<const char*, const char*> kRenamedFlags[] = {
    {"semantics", "torch-version"}, {"model-file", "model"}, {"cluster-file", "cluster"},
    {"base-file", "base"},          {"output", "out"},
};

}  // namespace

ArgParser::ArgParser(std::string command, std::string usage, std::string description)
    : m_command(std::move(command)),
      m_usage(std::move(usage)),
      m_description(std::move(description)) {}

ArgParser& ArgParser::flag(std::string name, std::string help) {
  m_flags.push_back({std::move(name), "", std::move(help)});
  return *this;
}

ArgParser& ArgParser::option(std::string name, std::string valueName, std::string help) {
  m_flags.push_back({std::move(name), std::move(valueName), std::move(help)});
  return *this;
}

ArgParser& ArgParser::positional(std::string name, std::string help, bool required) {
  m_positionals.push_back({std::move(name), std::move(help), required});
  return *this;
}

ArgParser& ArgParser::positionalList(std::string name, std::string help, bool required) {
  m_positionals.push_back({std::move(name), std::move(help), required, true});
  return *this;
}

ArgParser& ArgParser::options(const std::vector<SettingSpec>& specs) {
  for (const SettingSpec& spec : specs) {
    if (spec.valueName.empty()) {
      flag(spec.name, spec.help);
    } else {
      option(spec.name, spec.valueName, spec.help);
    }
  }
  return *this;
}

ArgParser& ArgParser::epilog(std::string text) {
  m_epilog = std::move(text);
  return *this;
}

const FlagSpec* ArgParser::find(const std::string& name) const {
  for (const auto& f : m_flags) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

ArgParser& ArgParser::shortAlias(std::string shortFlag, std::string longName) {
  m_shortAliases[std::move(shortFlag)] = std::move(longName);
  return *this;
}

ArgParser& ArgParser::deprecatedAlias(std::string oldName, std::string newName) {
  DDPSCOPE_CHECK_MSG(find(newName) != nullptr, "deprecated alias of an unknown flag");
  m_deprecated[std::move(oldName)] = std::move(newName);
  return *this;
}

std::string ArgParser::renamedTo(const std::string& oldName) const {
  if (find(oldName) != nullptr) return "";
  if (auto it = m_deprecated.find(oldName); it != m_deprecated.end()) return it->second;
  for (const auto& [from, to] : kRenamedFlags) {
    if (oldName == from && find(to) != nullptr) return to;
  }
  return "";
}

std::vector<std::pair<std::string, std::string>> ArgParser::oldSpellings() const {
  std::vector<std::pair<std::string, std::string>> out(m_deprecated.begin(), m_deprecated.end());
  for (const auto& [from, to] : kRenamedFlags) {
    if (m_deprecated.count(from) == 0 && !renamedTo(from).empty()) out.emplace_back(from, to);
  }
  std::sort(out.begin(), out.end());
  return out;
}

StatusOr<ParsedArgs> ArgParser::parse(const std::vector<std::string>& args,
                                      std::ostream& notes) const {
  ParsedArgs parsed;
  const std::string seeHelp = " (see '" + m_command + " --help')";
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (auto alias = m_shortAliases.find(arg); alias != m_shortAliases.end()) {
      arg = "--" + alias->second;
    }
    if (arg == "--help" || arg == "-h") {
      parsed.m_help = true;
      return parsed;
    }
    if (arg.starts_with("--") && arg.size() > 2) {
      std::string name = arg.substr(2);
      std::optional<std::string> inlineValue;
      if (auto eq = name.find('='); eq != std::string::npos) {
        inlineValue = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (std::string renamed = renamedTo(name); !renamed.empty()) {
        notes << m_command << ": note: --" << name
              << " is deprecated and goes in the next release; use --" << renamed << "\n";
        name = renamed;
      }
      const FlagSpec* spec = find(name);
      if (spec == nullptr) return invalidArgument("unknown flag --" + name + seeHelp);
      if (parsed.has(name)) return invalidArgument("--" + name + " given twice");
      if (spec->valueName.empty()) {
        if (inlineValue) return invalidArgument("--" + name + " takes no value");
        parsed.set(name, "");
      } else if (inlineValue) {
        parsed.set(name, *inlineValue);
      } else {
        if (i + 1 >= args.size()) {
          return invalidArgument("--" + name + ": expected a value (" + spec->valueName + ")");
        }
        parsed.set(name, args[++i]);
      }
      continue;
    }
    const bool takesMore = !m_positionals.empty() && m_positionals.back().list;
    if (parsed.m_positionals.size() >= m_positionals.size() && !takesMore) {
      return invalidArgument("unexpected argument '" + arg + "'" + seeHelp);
    }
    parsed.m_positionals.push_back(arg);
  }
  for (size_t i = parsed.m_positionals.size(); i < m_positionals.size(); ++i) {
    if (m_positionals[i].required) {
      return invalidArgument("missing " + m_positionals[i].name + seeHelp);
    }
  }
  return parsed;
}

std::string ArgParser::helpText() const {
  std::ostringstream out;
  out << "usage: " << m_command << " " << m_usage << "\n\n" << m_description << "\n";
  if (!m_positionals.empty()) {
    out << "\narguments:\n";
    for (const auto& p : m_positionals) {
      out << "  " << p.name << std::string(p.name.size() < 26 ? 26 - p.name.size() : 1, ' ')
          << p.help << "\n";
    }
  }
  out << "\noptions:\n";
  std::vector<FlagSpec> all = m_flags;
  all.push_back({"help", "", "show this help and exit"});
  for (const auto& f : all) {
    std::string left = "--" + f.name + (f.valueName.empty() ? "" : " " + f.valueName);
    out << "  " << left << std::string(left.size() < 26 ? 26 - left.size() : 1, ' ') << f.help
        << "\n";
  }
  if (!m_epilog.empty()) out << "\n" << m_epilog << "\n";
  if (const auto old = oldSpellings(); !old.empty()) {
    out << "\nold spellings, accepted with a note until the next release:";
    for (const auto& [from, to] : old) out << " --" << from << " (--" << to << ")";
    out << "\n";
  }
  return out.str();
}

}  // namespace ddpscope::cli
