#include "core/interop/hf_export_readme.h"

#include <cstdio>

namespace mok {

namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

std::string hf_export_readme(const ExperimentConfig& c, const HfExportResult& r, int vocab_size,
                             const std::string& tokenizer_kind, const std::string& dtype) {
  const ModelConfig& m = c.model;
  std::string s;
  s += "# " + c.name + " — a mok model in Mixtral format\n\n";
  s += "Exported by `mok export CHECKPOINT --hf DIR` from `" + r.checkpoint + "`.\n";
  s += "Architecture: **MixtralForCausalLM** (Transformers loads it without custom code): " +
       std::to_string(m.layers) + " layers, d_model " + std::to_string(m.d_model) + ", " + std::to_string(m.heads) +
       " heads, " + std::to_string(m.experts) + " experts of width " + std::to_string(m.expert_hidden) + ", top-" +
       std::to_string(m.top_k) + ", vocabulary " + std::to_string(vocab_size) + ", context " +
       std::to_string(c.data.seq_len) + " tokens, weights " + dtype + ".\n\n";
  s += "```python\n"
       "import torch\n"
       "from transformers import AutoModelForCausalLM, AutoTokenizer\n"
       "model = AutoModelForCausalLM.from_pretrained(DIR, torch_dtype=torch.float32)\n";
  if (r.tokenizer_json) {
    s += "tok = AutoTokenizer.from_pretrained(DIR)          # tokenizer.json\n"
         "ids = tok(\"The jury said\", return_tensors=\"pt\").input_ids\n";
  } else {
    s += "ids = torch.tensor([[84, 104, 101]])              # token ids (see Tokenizer below)\n";
  }
  s += "logits = model(ids).logits                          # (1, T, vocab)\n"
       "```\n\n";

  s += "## Why Mixtral\n\n"
       "mok's model is a pre-norm decoder with RMSNorm, rotary positions, multi-head attention without\n"
       "biases and SwiGLU experts chosen by a softmax-then-top-k router whose k gates are renormalised to\n"
       "sum to 1. Mixtral computes exactly this. Qwen2-MoE would need zero attention biases and a zero\n"
       "shared expert to say the same and renormalises only with norm_topk_prob; it could also hold dense\n"
       "layers, but its shared expert is gated by sigmoid(x·w), which mok's ungated one is not.\n\n";

  s += "## What maps to what\n\n"
       "| mok | Mixtral |\n|---|---|\n"
       "| `embed` (V, d) | `model.embed_tokens.weight` (V, d) |\n"
       "| `layers.L.attn_norm`, `ffn_norm` | `input_layernorm`, `post_attention_layernorm` (y = x·g/√(mean x² + eps), eps " +
       number(m.norm_eps) + ") |\n"
       "| `layers.L.attn.wqkv` (d, 3d) = [q │ k │ v] | `self_attn.q_proj`, `k_proj`, `v_proj` (d, d): column blocks, transposed |\n"
       "| `layers.L.attn.wo` (d, d) | `self_attn.o_proj` (d, d), transposed |\n"
       "| RoPE: pairs (i, i + hd/2) turned by pos·θ^(−2i/hd), θ " +
       number(m.rope_theta) + " | `rope_theta`, Transformers' rotate_half: the same pairs, no permutation |\n"
       "| `layers.L.moe.w_router` (d, E) | `block_sparse_moe.gate` (E, d); softmax over all experts, top-k, renormalised |\n"
       "| `layers.L.moe.experts.e.w_up` (d, 2f) = [gate │ up] | `experts.e.w1` (gate) and `experts.e.w3` (up), (f, d) |\n"
       "| `layers.L.moe.experts.e.w_down` (f, d) | `experts.e.w2` (d, f) |\n"
       "| `final_norm` | `model.norm` |\n"
       "| `head` (d, V) or tied to `embed` | `lm_head.weight` (V, d), or `tie_word_embeddings` " +
       std::string(m.tie_embeddings ? "true (this model)" : "false (this model)") + " |\n\n";

  s += "## Not carried by the export\n\n";
  for (const std::string& n : r.notes) s += "- " + n + "\n";
  s += "- Routing ties: mok breaks equal router probabilities toward the lower expert index; PyTorch's\n"
       "  topk leaves ties unspecified (equal probabilities practically never occur in trained models).\n\n";

  s += "## Tokenizer\n\n";
  s += "mok trained this model with its " + tokenizer_kind + " tokenizer (" + std::to_string(vocab_size) +
       " ids; `mok_tokenizer.txt` is mok's own file). ";
  if (r.tokenizer_json) {
    if (tokenizer_kind == "byte") {
      s += "`tokenizer.json` describes it as a byte-level BPE without merges: the ByteLevel pre-tokenizer maps\n"
           "each byte of the UTF-8 text to one character (GPT-2's byte table) and token id = byte value.\n";
    } else {
      s += "`tokenizer.json` describes it as a byte-level BPE: the ByteLevel pre-tokenizer maps each byte of\n"
           "the UTF-8 text to one character (GPT-2's byte table), a Split pre-tokenizer with one regular\n"
           "expression cuts the text into mok's pieces (runs of letters/bytes ≥ 0x80, digits, other\n"
           "characters or whitespace; a single space joins the run after it; at most 64 bytes a piece), and\n"
           "the BPE model applies mok's merges in rank order (ids 0..255 the bytes, 256 + k merge k). It\n"
           "encodes any valid UTF-8 text to mok's ids.\n";
    }
    s += "No special tokens (BOS, EOS, padding) exist; the ByteLevel decoder turns ids back into text.\n\n";
  } else {
    s += "No `tokenizer.json` was written: " + r.tokenizer_note +
         ".\nEncode with mok (`mok_tokenizer.txt`) or from Python: ids 0..255 are the bytes, and id 256 + k\n"
         "is merge k of that file (the concatenation of its two ids' bytes).\n\n";
  }

  s += "## Checking it\n\n"
       "`mok_reference.json` holds mok's logits for a text and a random token sequence and mok's greedy\n"
       "continuation of a prompt. On a machine with PyTorch and Transformers:\n\n"
       "    python3 tools/hf/check_hf_export.py DIR\n\n"
       "compares them (maximum relative error ≤ 1e-4 in fp32, the same greedy tokens).\n"
       "`mok import-hf DIR` turns the folder back into a mok checkpoint (bitwise the same weights).\n";
  return s;
}

}  // namespace mok
