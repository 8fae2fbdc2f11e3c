// Fuzz target: a user's corpus file, from disk to tokens: the corpus loader (UTF-8 check,
// byte-order mark), the Brown detokenizer, and BPE training and encoding on the text. Each
// input ends in a CorpusError, or text that the tokenizers encode losslessly.

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "core/data/bpe_tokenizer.h"
#include "core/data/byte_tokenizer.h"
#include "core/data/corpus.h"
#include "tests/fuzz/fuzz_require.h"

namespace {

// A file of this process for the input (the loader reads paths), removed at exit; in memory
// (/dev/shm) where the system has it, as every input is written once.
std::filesystem::path input_folder() {
  std::error_code ec;
  return std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm")
                                                        : std::filesystem::temp_directory_path();
}

struct InputFile {
  std::string path = (input_folder() / ("mok-fuzz-corpus-" + std::to_string(::getpid()) + ".txt")).string();
  ~InputFile() { std::remove(path.c_str()); }
};

const std::string& input_path() {
  static const InputFile file;
  return file.path;
}

void require_lossless(const mok::Tokenizer& tok, std::string_view text) {
  const std::vector<int32_t> ids = tok.encode(text);
  for (int32_t id : ids) mok::fuzz::fuzz_require(id >= 0 && id < tok.vocab_size(), "ids lie in the vocabulary");
  mok::fuzz::fuzz_require(tok.decode(ids) == text, tok.name() + ": decode(encode(text)) == text");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using mok::fuzz::fuzz_require;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  // Text that is not UTF-8 becomes UTF-8 by replacement, and only then.
  const std::string repaired = mok::replace_invalid_utf8(bytes);
  fuzz_require(mok::find_invalid_utf8(repaired) < 0, "replace_invalid_utf8 gives UTF-8");
  fuzz_require((repaired == bytes) == (mok::find_invalid_utf8(bytes) < 0), "valid text is left as it is");
  const std::string detokenized = mok::brown_file_to_text(repaired);
  fuzz_require(mok::find_invalid_utf8(detokenized) < 0, "the Brown detokenizer keeps UTF-8 text UTF-8");

  {
    std::ofstream out(input_path(), std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  mok::Corpus corpus;
  try {
    corpus = mok::load_corpus(input_path());
  } catch (const mok::CorpusError& e) {
    fuzz_require(std::string(e.what()).find(input_path()) != std::string::npos, "the error names the file");
    return 0;
  }
  fuzz_require(corpus.documents.size() == 1, "a file is one document");
  const std::string& text = corpus.documents[0].text;
  fuzz_require(!text.empty() && mok::find_invalid_utf8(text) < 0, "a loaded document is UTF-8 and not empty");

  require_lossless(mok::ByteTokenizer(), text);
  const mok::BpeTokenizer bpe = mok::BpeTokenizer::train({text}, 256 + 24);
  require_lossless(bpe, text);
  require_lossless(bpe, detokenized);
  return 0;
}
