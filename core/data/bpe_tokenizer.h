#pragma once
// BpeTokenizer: byte-level byte-pair encoding.
//
// Ids 0..255 are the bytes; id 256+k is merge k, the concatenation of its pair (left,right).
// Text is first cut into pieces (pretokenizer "ws-class-1", see bpe_pieces) and merges
// never cross a piece boundary, so a word is encoded the same wherever it occurs and
// encode() can cache one result per distinct piece.
//
// Training (train): count the distinct pieces of the texts, then repeatedly merge the most
// frequent adjacent pair (ties: smallest left id, then smallest right id), updating pair
// counts incrementally from the words that contain the merged pair only. Deterministic:
// same texts and vocab size → same merges. Encoding applies merges in rank order within a
// piece (lowest-rank adjacent pair first, all its occurrences left to right).

#include <functional>
#include <unordered_map>

#include "core/data/tokenizer.h"

namespace mok {

// Cuts text into pieces, calling fn(piece) in order; concatenating the pieces gives text.
// Classes: whitespace, letter (ASCII letters and every byte ≥ 0x80, so UTF-8 sequences stay
// whole), digit, other. A piece is a run of one class; a single ' ' right before a
// non-whitespace run is attached to it (" word"), and runs longer than kMaxPieceBytes are
// cut into chunks of that size.
inline constexpr size_t kBpeMaxPieceBytes = 64;
void bpe_pieces(std::string_view text, const std::function<void(std::string_view)>& fn);

class BpeTokenizer final : public Tokenizer {
 public:
  struct Merge {
    int32_t left, right;
  };
  // Called after each merge: (merges done, merges wanted).
  using Progress = std::function<void(int, int)>;

  // Needs 256 ≤ vocab_size ≤ 1<<20. Stops early (fewer merges) only when no adjacent pair
  // is left in the texts.
  static BpeTokenizer train(const std::vector<std::string_view>& texts, int vocab_size,
                            const Progress& progress = {});

  explicit BpeTokenizer(std::vector<Merge> merges);  // validates ids; throws TokenizerError

  std::vector<int32_t> encode(std::string_view text) const override;
  int vocab_size() const override { return 256 + static_cast<int>(merges_.size()); }
  std::string name() const override { return "bpe"; }
  const std::string& token_bytes(int32_t id) const override;
  std::string to_text() const override;

  const std::vector<Merge>& merges() const { return merges_; }

 private:
  void encode_piece(std::string_view piece, std::vector<int32_t>& out) const;

  std::vector<Merge> merges_;
  std::unordered_map<uint64_t, int32_t> rank_;  // (left<<32 | right) → merge index
  std::vector<std::string> bytes_;              // (vocab_size) bytes of each id
};

}  // namespace mok
