"""Turns the SmolLM2-135M-Instruct GGUF (Q4_1, the file the llama.cpp tests serve) into a Hugging
Face model folder that vLLM's CPU build can load: config.json, model.safetensors (bfloat16, the
dequantized Q4_1 weights) and the tokenizer files with the GGUF's chat template.

vLLM 0.32's core has no GGUF loader, so scripts/real-vllm.sh runs this once per cache:

    VENV/bin/python scripts/real-vllm-model.py GGUF OUTDIR

The Python must have torch, transformers and gguf (the venv that scripts/real-vllm.sh installs).
Writes into OUTDIR.tmp first and renames it, so an interrupted run leaves no half-written model.
"""

import os
import shutil
import sys

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    gguf, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    if not os.path.isfile(gguf):
        sys.exit(f"real-vllm-model: no GGUF file at {gguf}")
    folder, name = os.path.dirname(gguf), os.path.basename(gguf)
    tmp = out + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    # transformers marks a model loaded from a GGUF file as quantized although its tensors are
    # already dequantized: without this, save_pretrained writes a config vLLM refuses to load.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    model.save_pretrained(tmp, safe_serialization=True)
    tokenizer.save_pretrained(tmp)
    if not tokenizer.chat_template:
        sys.exit("real-vllm-model: the GGUF has no chat template; /v1/chat/completions would fail")
    shutil.rmtree(out, ignore_errors=True)
    os.rename(tmp, out)
    print(f"real-vllm-model: wrote {out} (vocabulary {len(tokenizer)}, chat template kept)")


if __name__ == "__main__":
    main()
