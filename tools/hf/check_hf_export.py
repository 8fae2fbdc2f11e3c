#!/usr/bin/env python3
"""Check a `mok export --hf` folder against Transformers.

Loads DIR with transformers' AutoModelForCausalLM (float32, no TF32), feeds the token ids of
DIR/mok_reference.json (written by the export) and compares:
  - logits: relative error max|hf - mok| / max|mok| per sequence, must be <= --tolerance
    (default 1e-4);
  - greedy continuation: argmax decoding of the reference prompt must give mok's tokens (the
    tokens `mok generate --temperature 0` produces); a difference where mok's two best
    logits are closer than the tolerance is reported as a near-tie, not a failure;
  - tokenizer (when tokenizer.json and the `tokenizers` module exist): encoding the
    reference text gives mok's ids, and decoding them gives the text back;
  - with --mok-generate FILE (the --json output of `mok generate ... --temperature 0`):
    Transformers' greedy text equals mok's.

Exit codes: 0 all checks pass, 1 a check failed, 2 bad usage or unreadable files,
3 a required Python module (torch, transformers) is missing.
The last stdout line is one JSON object with the figures.
"""

import argparse
import json
import os
import platform
import sys


def fail_usage(msg):
    print(f"check_hf_export: {msg}", file=sys.stderr)
    sys.exit(2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("folder", help="the exported folder (mok export CHECKPOINT --hf DIR)")
    ap.add_argument("--reference", help="reference file (default DIR/mok_reference.json)")
    ap.add_argument("--mok-generate", help="JSON output of `mok generate ... --temperature 0 --json`")
    ap.add_argument("--device", default="auto", help="cpu, cuda or auto (default: cuda when available)")
    ap.add_argument("--tolerance", type=float, default=1e-4, help="maximum relative logit error (default 1e-4)")
    args = ap.parse_args()

    print(f"python {platform.python_version()}")
    try:
        import torch
    except ImportError as e:
        print(f"check_hf_export: PyTorch is missing ({e}); install torch to run this check", file=sys.stderr)
        sys.exit(3)
    try:
        import transformers
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print(f"check_hf_export: transformers is missing ({e}); install transformers to run this check", file=sys.stderr)
        sys.exit(3)
    try:
        import tokenizers
    except ImportError:
        tokenizers = None
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, "
          f"tokenizers {tokenizers.__version__ if tokenizers else 'missing (tokenizer check skipped)'}")

    folder = args.folder
    ref_path = args.reference or os.path.join(folder, "mok_reference.json")
    for need in (os.path.join(folder, "config.json"), ref_path):
        if not os.path.exists(need):
            fail_usage(f"{need} does not exist (write the folder with `mok export CHECKPOINT --hf DIR`)")
    with open(ref_path, encoding="utf-8") as f:
        ref = json.load(f)
    if ref.get("format") != "mok-hf-reference-1":
        fail_usage(f"{ref_path}: not a mok reference file (format {ref.get('format')!r})")
    with open(os.path.join(folder, "config.json"), encoding="utf-8") as f:
        config = json.load(f)
    if config.get("torch_dtype", "float32") != "float32":
        print(f"note: the weights are {config.get('torch_dtype')}; mok's reference logits are float32, "
              "so expect errors of the weights' precision")

    # float32 throughout: no TF32 in matrix products or convolutions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    major = int(transformers.__version__.split(".")[0])
    dtype_kw = {"dtype": torch.float32} if major >= 5 else {"torch_dtype": torch.float32}
    model = AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager", **dtype_kw)
    model.to(device).eval()
    print(f"loaded {type(model).__name__} on {device}: {sum(p.numel() for p in model.parameters())} parameters")

    ok = True
    figures = {"device": device, "torch": torch.__version__, "transformers": transformers.__version__}

    def forward(ids):
        with torch.no_grad():
            x = torch.tensor([ids], dtype=torch.long, device=device)
            return model(input_ids=x).logits[0].float().cpu()

    # 1. Logits.
    worst = 0.0
    for seq in ref["sequences"]:
        hf = forward(seq["tokens"])
        mok = torch.tensor(seq["logits"], dtype=torch.float32)
        if hf.shape != mok.shape:
            print(f"FAIL {seq['name']}: logits shape {tuple(hf.shape)} vs mok {tuple(mok.shape)}")
            ok = False
            continue
        rel = ((hf - mok).abs().max() / mok.abs().max()).item()
        agree = (hf.argmax(-1) == mok.argmax(-1)).float().mean().item()
        worst = max(worst, rel)
        verdict = "ok" if rel <= args.tolerance else "FAIL"
        print(f"{verdict} logits '{seq['name']}' ({len(seq['tokens'])} tokens): max relative error {rel:.3e} "
              f"(tolerance {args.tolerance:g}), argmax agreement {agree:.3f}")
        ok &= rel <= args.tolerance
    figures["max_rel_err"] = worst

    # 2. Greedy continuation, teacher-forced on mok's tokens so one near-tie does not hide the rest.
    greedy = ref["greedy"]
    ids = list(greedy["prompt_tokens"])
    want = greedy["new_tokens"]
    got, near_ties, mismatches = [], 0, 0
    for i, mok_next in enumerate(want):
        logits = forward(ids)[-1]
        hf_next = int(logits.argmax().item())
        got.append(hf_next)
        if hf_next != mok_next:
            gap = abs(logits[hf_next].item() - logits[mok_next].item()) / logits.abs().max().item()
            if gap <= args.tolerance:
                near_ties += 1
                print(f"note: greedy step {i}: Transformers picks {hf_next}, mok {mok_next}: a near-tie (gap {gap:.2e})")
            else:
                mismatches += 1
                print(f"FAIL greedy step {i}: Transformers picks {hf_next}, mok {mok_next} (relative gap {gap:.2e})")
        ids.append(mok_next)
    print(f"{'ok' if mismatches == 0 else 'FAIL'} greedy: {len(want) - mismatches - near_ties}/{len(want)} tokens equal, "
          f"{near_ties} near-ties, prompt {greedy['prompt']!r}")
    ok &= mismatches == 0
    figures["greedy_tokens"] = len(want)
    figures["greedy_mismatches"] = mismatches
    figures["greedy_near_ties"] = near_ties
    # Transformers' own generate(), for the record (its free-running output).
    try:
        with torch.no_grad():
            x = torch.tensor([greedy["prompt_tokens"]], dtype=torch.long, device=device)
            out = model.generate(x, max_new_tokens=len(want), do_sample=False, pad_token_id=0,
                                 eos_token_id=None)[0, x.shape[1]:].tolist()
        print(f"{'ok' if out == want else 'note'} model.generate(do_sample=False) "
              f"{'equals' if out == want else 'differs from'} mok's continuation")
        figures["generate_equal"] = out == want
    except Exception as e:  # generate() details vary between versions; the loop above is the check
        print(f"note: model.generate could not run: {e}")
        out = got

    # 3. Tokenizer.
    tok_path = os.path.join(folder, "tokenizer.json")
    tok = None
    if tokenizers and os.path.exists(tok_path):
        tok = tokenizers.Tokenizer.from_file(tok_path)
        check = ref["tokenizer_check"]
        enc = tok.encode(check["text"]).ids
        dec = tok.decode(check["tokens"])
        tok_ok = enc == check["tokens"] and dec == check["text"]
        print(f"{'ok' if tok_ok else 'FAIL'} tokenizer.json: encode {'equals' if enc == check['tokens'] else 'differs from'} "
              f"mok's {len(check['tokens'])} ids, decode {'gives' if dec == check['text'] else 'does not give'} the text back")
        if enc != check["tokens"]:
            first = next((i for i, (a, b) in enumerate(zip(enc, check["tokens"])) if a != b), min(len(enc), len(check["tokens"])))
            print(f"  first difference at id {first}: tokenizers {enc[first:first + 8]} mok {check['tokens'][first:first + 8]}")
        ok &= tok_ok
        figures["tokenizer_equal"] = tok_ok
    else:
        print("note: tokenizer check skipped (no tokenizer.json or no `tokenizers` module)")

    # 4. mok generate's text against Transformers' greedy text.
    if args.mok_generate:
        with open(args.mok_generate, encoding="utf-8") as f:
            lines = [l for l in f.read().splitlines() if l.strip().startswith("{")]
        if not lines:
            fail_usage(f"{args.mok_generate}: no JSON object (run `mok generate ... --json`)")
        mok_text = json.loads(lines[-1])["text"]
        if tok is None:
            print("note: mok generate text not compared (no tokenizer to decode with)")
        else:
            hf_text = tok.decode(greedy["prompt_tokens"] + got)
            same = hf_text == mok_text
            strict = "\ufffd" not in mok_text  # mok writes bytes that are not UTF-8 as U+FFFD
            print(f"{'ok' if same else ('FAIL' if strict else 'note')} mok generate text "
                  f"{'equals' if same else 'differs from'} Transformers' greedy text")
            if not same:
                print(f"  mok:          {mok_text!r}\n  transformers: {hf_text!r}")
            ok &= same or not strict
            figures["generate_text_equal"] = same

    figures["ok"] = bool(ok)
    print("PASS" if ok else "FAILED")
    print(json.dumps(figures))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
