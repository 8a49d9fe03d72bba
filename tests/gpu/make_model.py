#!/usr/bin/env python3
"""Build a small randomly initialised Qwen3-Next model and its tokenizer, offline, for a real SGLang server.

    python3 make_model.py OUT_DIR [--seed N] [--no-verify]

Needs only torch, transformers 5.x, tokenizers and safetensors (what the lent GPU machine has: torch 2.11,
transformers 5.17.0, tokenizers 0.23.2); no network, nothing downloaded. Run it there: the weights (about
115 MB in bf16) are more than one device call carries.

- `Qwen3NextForCausalLM`, hybrid: gated delta-net (linear attention) layers with a full (gated) attention layer
  every 4th, 4 layers, hidden 1024, head_dim 256 (8 query heads, 2 KV heads), 8 routed experts (2 a token) and a
  shared expert in every layer, about 57 M parameters, bf16, saved with safetensors.
- config.json gets `full_attention_interval: 4` added: transformers 5.x writes `layer_types` only, and SGLang
  0.5.12's own Qwen3NextConfig reads `full_attention_interval` (without it: AttributeError at load); likewise
  `rope_theta` and `partial_rotary_factor` at the top level when transformers wrote them into `rope_parameters`
  only (SGLang reads the top-level ones and would fall back to its defaults).
- A byte-level BPE tokenizer of exactly 4096 tokens (the model's vocab_size), trained with `tokenizers` on text
  generated here (an embedded paragraph and seeded pseudo-words: the same every run), saved as a transformers
  fast tokenizer with the special tokens <|endoftext|> (pad), <|im_start|>, <|im_end|> (eos), <think>, </think>
  and a Qwen-style chat template whose assistant turn opens `<think>` (SGLang's qwen3 reasoning parser), or
  `<think>\\n\\n</think>` when called with enable_thinking=False.

Then (unless --no-verify) it loads everything back with AutoConfig, AutoTokenizer and AutoModelForCausalLM, renders
the chat template, runs one forward pass on the CPU and prints the sizes.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

import tokenizers
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    PreTrainedTokenizerFast,
    Qwen3NextConfig,
    Qwen3NextForCausalLM,
)

VOCAB_SIZE = 4096
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set content = message['content'] if message['content'] is string else '' -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + content + '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}"
    "{{- '<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>assistant\\n<think>\\n' -}}"
    "{%- endif -%}"
    "{%- endif -%}"
)
MODEL = {
    "vocab_size": VOCAB_SIZE,
    "hidden_size": 1024,
    "intermediate_size": 1024,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "linear_num_key_heads": 4,
    "linear_num_value_heads": 8,
    "linear_key_head_dim": 128,
    "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4,
    "num_experts": 8,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 256,
    "shared_expert_intermediate_size": 256,
    "decoder_sparse_step": 1,
    "max_position_embeddings": 32768,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
}
FULL_ATTENTION_INTERVAL = 4
PARAGRAPH = """\
SGLang serves large language models with a fast runtime: a scheduler batches the requests, the attention kernels
read a paged key-value cache, and the radix cache shares the prefixes that requests have in common. A hybrid model
such as Qwen3-Next mixes linear attention layers, whose state has a fixed size, with full attention every fourth
layer. The tokenizer turns text into tokens; the chat template puts each message between <|im_start|> and
<|im_end|>, and the assistant's turn opens a <think> block that the reasoning parser splits from the answer.
Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 100 256 1024 4096 65535. Punctuation: , . ; : ! ? ( ) [ ] { } " ' - _ / \\ = + *
The quick brown fox jumps over the lazy dog. How are you today? I am fine, thank you. What is two plus two? Four.
"""
SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ne",
    "ru",
    "sa",
    "ti",
    "vo",
    "zen",
    "qua",
    "bri",
    "sto",
    "pla",
    "dre",
    "ghu",
    "xan",
    "yel",
    "ombr",
    "ist",
    "ung",
    "ae",
    "io",
    "th",
    "sh",
    "ch",
    "er",
    "an",
    "or",
    "is",
    "ed",
]


def corpus(seed):
    """The training text: the paragraph many times and seeded pseudo-words (enough pairs for 4096 tokens)."""
    rng = random.Random(seed)
    lines = [PARAGRAPH] * 50
    for _ in range(4000):
        words = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(4, 16))]
        if rng.random() < 0.3:
            words.append(str(rng.randint(0, 99999)))
        lines.append(" ".join(words).capitalize() + rng.choice([".", "?", "!", ",", ":"]))
    return lines


def build_tokenizer(out, seed):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL, min_frequency=1, initial_alphabet=alphabet, show_progress=False
    )
    tok.train_from_iterator(corpus(seed), trainer)
    if tok.get_vocab_size() != VOCAB_SIZE:
        sys.exit(f"make_model: the tokenizer has {tok.get_vocab_size()} tokens, not {VOCAB_SIZE}: more text needed")
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>", "<think>", "</think>"],
        model_max_length=MODEL["max_position_embeddings"],
        clean_up_tokenization_spaces=False,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return {name: tok.token_to_id(name) for name in SPECIAL}


def build_model(out, seed, ids):
    torch.manual_seed(seed)
    layer_types = [
        "full_attention" if (i + 1) % FULL_ATTENTION_INTERVAL == 0 else "linear_attention"
        for i in range(MODEL["num_hidden_layers"])
    ]
    config = Qwen3NextConfig(
        **MODEL,
        layer_types=layer_types,
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        bos_token_id=None,
    )
    model = Qwen3NextForCausalLM(config).to(torch.bfloat16)
    model.config.dtype = torch.bfloat16
    params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(out, safe_serialization=True)
    GenerationConfig(
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        do_sample=True,
        temperature=0.7,
        top_p=0.9,
        top_k=20,
    ).save_pretrained(out)

    path = Path(out) / "config.json"
    data = json.loads(path.read_text())
    data["full_attention_interval"] = FULL_ATTENTION_INTERVAL  # SGLang 0.5.12's Qwen3NextConfig reads it
    rope = data.get("rope_parameters") or {}
    for key in ("rope_theta", "partial_rotary_factor"):
        if key not in data and key in rope:
            data[key] = rope[key]
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return params, layer_types


def verify(out, params):
    config = AutoConfig.from_pretrained(out)
    tokenizer = AutoTokenizer.from_pretrained(out)
    raw = json.loads((Path(out) / "config.json").read_text())
    problems = []
    if config.model_type != "qwen3_next" or config.architectures != ["Qwen3NextForCausalLM"]:
        problems.append(f"model type {config.model_type} {config.architectures}")
    if len(tokenizer) != config.vocab_size or config.vocab_size != VOCAB_SIZE:
        problems.append(f"tokenizer {len(tokenizer)} tokens, config vocab_size {config.vocab_size}")
    if raw.get("full_attention_interval") != FULL_ATTENTION_INTERVAL:
        problems.append("config.json lacks full_attention_interval")
    expected = [
        "full_attention" if (i + 1) % raw["full_attention_interval"] == 0 else "linear_attention"
        for i in range(config.num_hidden_layers)
    ]
    if list(config.layer_types) != expected:
        problems.append(f"layer_types {config.layer_types} disagree with full_attention_interval")
    if tokenizer.eos_token != "<|im_end|>" or config.eos_token_id != tokenizer.convert_tokens_to_ids("<|im_end|>"):
        problems.append(f"eos {tokenizer.eos_token} / {config.eos_token_id}")
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "What is 2 + 2?"}]
    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if not prompt.endswith("<|im_start|>assistant\n<think>\n"):
        problems.append(f"chat template: {prompt!r}")
    no_think = tokenizer.apply_chat_template(
        messages, tokenize=False, add_generation_prompt=True, enable_thinking=False
    )
    ids = tokenizer(prompt)["input_ids"]
    for special in SPECIAL[1:]:
        if len(tokenizer(special)["input_ids"]) != 1:
            problems.append(f"{special} is not one token")
    if tokenizer.decode(ids) != prompt:
        problems.append("decode(encode(prompt)) differs")
    model = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16)
    loaded = sum(p.numel() for p in model.parameters())
    t0 = time.monotonic()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits
    forward = time.monotonic() - t0
    if tuple(logits.shape) != (1, len(ids), VOCAB_SIZE) or not torch.isfinite(logits).all():
        problems.append(f"logits {tuple(logits.shape)}, finite: {bool(torch.isfinite(logits).all())}")
    if loaded != params:
        problems.append(f"{loaded} parameters loaded, {params} saved")
    print(f"prompt ({len(ids)} tokens): {prompt!r}")
    print(f"prompt, enable_thinking=False: {no_think[-40:]!r}")
    print(f"forward pass on the CPU: logits {tuple(logits.shape)} in {forward:.2f} s, dtype {logits.dtype}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-verify", action="store_true", help="skip loading it back and the forward pass")
    args = parser.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, tokenizers {tokenizers.__version__}")
    if int(transformers.__version__.split(".")[0]) < 5:
        sys.exit("make_model: transformers 5.x needed (Qwen3-Next with layer_types, dtype=)")
    t0 = time.monotonic()
    ids = build_tokenizer(out, args.seed)
    params, layer_types = build_model(out, args.seed, ids)
    print(
        f"built in {time.monotonic() - t0:.1f} s: Qwen3NextForCausalLM, {params / 1e6:.1f} M parameters, layers "
        f"{layer_types}, special tokens {ids}"
    )
    out.chmod(0o755)
    for path in out.iterdir():  # safetensors writes the weights 0600: the service user must read them
        path.chmod(0o644)
    problems = [] if args.no_verify else verify(out, params)
    total = 0
    for path in sorted(out.iterdir()):
        total += path.stat().st_size
        print(f"  {path.stat().st_mode & 0o777:04o} {path.name:32} {path.stat().st_size / 1e6:9.3f} MB")
    print(f"{out}: {total / 1e6:.1f} MB ({total / 2**20:.1f} MiB)")
    if problems:
        sys.exit("make_model: " + "; ".join(problems))
    return 0


if __name__ == "__main__":
    sys.exit(main())
