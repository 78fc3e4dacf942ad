// ArgParser: a small declarative command-line parser for the ddpscope subcommands.
//
// Each subcommand declares its flags (with or without a value) and positionals;
// parse() fills a ParsedArgs or returns an InvalidArgument Status that names the
// flag and what was expected ("--bucket-cap-mb: expected a positive number, got
// 'abc'"). `--flag=value` and `--flag value` are both accepted. --help is built in.
//
// Renamed flags: an old spelling keeps working for one release. It means its new flag, and
// parse() writes one line about it to `notes` (the command's stderr):
//   ddpscope plan: note: --torch is deprecated and goes in the next release; use --torch-version
// The spellings every command renamed at once (kRenamedFlags in arg_parser.cpp: --semantics,
// --model-file, --cluster-file, --base-file, --output) apply wherever their new flag exists;
// a command adds its own with deprecatedAlias().
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/setting_values.h"
#include "base/status.h"

namespace ddpscope::cli {

using FlagSpec = SettingSpec;  // name without "--", value name (empty: a switch), help

// The parsed flags (a SettingValues: name = flag without "--") and positionals.
class ParsedArgs : public SettingValues {
 public:
  const std::vector<std::string>& positionals() const { return m_positionals; }
  bool helpRequested() const { return m_help; }

 private:
  friend class ArgParser;
  std::vector<std::string> m_positionals;
  bool m_help = false;
};

class ArgParser {
 public:
  // `command` is e.g. "ddpscope buckets"; `usage` the synopsis line after it.
  ArgParser(std::string command, std::string usage, std::string description);

  ArgParser& flag(std::string name, std::string help);                           // switch
  ArgParser& option(std::string name, std::string valueName, std::string help);  // takes a value
  // Registers each spec: a switch when its valueName is empty, else an option.
  ArgParser& options(const std::vector<SettingSpec>& specs);
  ArgParser& positional(std::string name, std::string help, bool required);
  // The last positional, taking every remaining argument (at least one when required).
  ArgParser& positionalList(std::string name, std::string help, bool required);
  // Free text appended after the flag list (examples, notes).
  ArgParser& epilog(std::string text);
  // `shortFlag` (e.g. "-o") given as an argument means --`longName`.
  ArgParser& shortAlias(std::string shortFlag, std::string longName);
  // `--oldName` means --`newName` (a registered flag) for one more release, with a note.
  ArgParser& deprecatedAlias(std::string oldName, std::string newName);

  // Deprecation notes go to `notes`, one line each.
  StatusOr<ParsedArgs> parse(const std::vector<std::string>& args, std::ostream& notes) const;
  std::string helpText() const;
  const std::string& command() const { return m_command; }

 private:
  const FlagSpec* find(const std::string& name) const;
  // The new name of an old spelling this parser accepts ("" if none).
  std::string renamedTo(const std::string& oldName) const;
  // The old spellings this parser accepts, {old, new}, for --help.
  std::vector<std::pair<std::string, std::string>> oldSpellings() const;

  std::string m_command;
  std::string m_usage;
  std::string m_description;
  std::string m_epilog;
  std::vector<FlagSpec> m_flags;
  std::map<std::string, std::string> m_shortAliases;  // "-o" -> "out"
  std::map<std::string, std::string> m_deprecated;    // "torch" -> "torch-version"
  struct Positional {
    std::string name;
    std::string help;
    bool required;
    bool list = false;
  };
  std::vector<Positional> m_positionals;
};

}  // namespace ddpscope::cli
