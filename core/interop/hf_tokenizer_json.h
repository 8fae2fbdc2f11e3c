#pragma once
// mok's tokenizers in the JSON format of the Hugging Face `tokenizers` library
// (tokenizer.json), loadable by PreTrainedTokenizerFast / tokenizers.Tokenizer without
// custom code, and read back.
//
// Both tokenizers become a byte-level BPE model: the ByteLevel pre-tokenizer (no regex, no
// prefix space) maps every byte of the UTF-8 text to one printable character (GPT-2's
// byte-to-unicode table), the vocabulary holds id b for the character of byte b (b < 256)
// and id 256 + k for merge k, the merges are mok's in rank order, and the ByteLevel decoder
// maps back to bytes. The byte tokenizer has no merges, so each byte is one token.
//
// The BPE tokenizer cuts text into pieces first (bpe_pieces, "ws-class-1"); a Split
// pre-tokenizer with one regular expression over the mapped characters does the same
// (mok_bpe_split_regex), so the encodings agree on all valid UTF-8 text. Merges within a
// piece apply in rank order in both (lowest-rank pair first, left to right).
// Not representable: a BPE vocabulary where two ids stand for the same bytes (the JSON
// vocabulary maps strings to ids); mok_tokenizer_json then returns "" and says why.

#include <cstdint>
#include <memory>
#include <string>

#include "core/data/tokenizer.h"

namespace mok {

// The character (UTF-8) GPT-2's byte-level table maps `byte` to.
std::string byte_level_char(uint8_t byte);

// The Split regex (Oniguruma syntax, over mapped characters) that cuts text as bpe_pieces.
std::string mok_bpe_split_regex();

// tokenizer.json text for `tokenizer`, or "" with *why_not set when it cannot be written.
std::string mok_tokenizer_json(const Tokenizer& tokenizer, std::string* why_not);

// A mok tokenizer from a tokenizer.json in the layout above (a byte-level BPE whose ids
// 0..255 are the bytes and id 256 + k merge k). Throws TokenizerError naming the file and
// what differs (another vocabulary order, a normalizer, added tokens, ...).
std::unique_ptr<Tokenizer> tokenizer_from_hf_json(const std::string& path);

}  // namespace mok
