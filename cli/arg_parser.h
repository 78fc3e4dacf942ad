// ArgParser: a small declarative command-line parser for the ddpscope subcommands.
//
// Each subcommand declares its flags (with or without a value) and positionals;
// parse() fills a ParsedArgs or returns an InvalidArgument Status that names the
// flag and what was expected ("--bucket-cap-mb: expected a positive number, got
// 'abc'"). `--flag=value` and `--flag value` are both accepted. --help is built in.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace ddpscope::cli {

struct FlagSpec {
  std::string name;       // without the leading "--"
  std::string valueName;  // empty for a boolean switch, else shown in help ("MiB")
  std::string help;
};

class ParsedArgs {
 public:
  bool has(const std::string& flag) const { return m_values.count(flag) > 0; }
  // The flag's value, or nullopt when absent (switches have value "").
  std::optional<std::string> value(const std::string& flag) const;
  const std::vector<std::string>& positionals() const { return m_positionals; }
  bool helpRequested() const { return m_help; }

  // Typed getters: absent → fallback; present but malformed → error naming the flag.
  StatusOr<double> positiveDouble(const std::string& flag, double fallback) const;
  StatusOr<int64_t> positiveInt(const std::string& flag, int64_t fallback) const;
  StatusOr<double> nonNegativeDouble(const std::string& flag, double fallback) const;
  StatusOr<int64_t> nonNegativeInt(const std::string& flag, int64_t fallback) const;

 private:
  friend class ArgParser;
  std::map<std::string, std::string> m_values;
  std::vector<std::string> m_positionals;
  bool m_help = false;
};

class ArgParser {
 public:
  // `command` is e.g. "ddpscope buckets"; `usage` the synopsis line after it.
  ArgParser(std::string command, std::string usage, std::string description);

  ArgParser& flag(std::string name, std::string help);                           // switch
  ArgParser& option(std::string name, std::string valueName, std::string help);  // takes a value
  // Changes an added flag's value name and help (a command that reuses a shared flag set with
  // narrower semantics, e.g. plan's single --nodes). CHECKs that the flag was added.
  ArgParser& redescribe(const std::string& name, std::string valueName, std::string help);
  ArgParser& positional(std::string name, std::string help, bool required);
  // The last positional, taking every remaining argument (at least one when required).
  ArgParser& positionalList(std::string name, std::string help, bool required);
  // Free text appended after the flag list (examples, notes).
  ArgParser& epilog(std::string text);

  StatusOr<ParsedArgs> parse(const std::vector<std::string>& args) const;
  std::string helpText() const;
  const std::string& command() const { return m_command; }

 private:
  const FlagSpec* find(const std::string& name) const;

  std::string m_command;
  std::string m_usage;
  std::string m_description;
  std::string m_epilog;
  std::vector<FlagSpec> m_flags;
  struct Positional {
    std::string name;
    std::string help;
    bool required;
    bool list = false;
  };
  std::vector<Positional> m_positionals;
};

}  // namespace ddpscope::cli
