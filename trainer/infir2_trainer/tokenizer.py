"""A tiny fixed tokenizer: characters, two-digit numbers, and Qwen2's chat special tokens.

Ids: five special tokens, every character (newline + printable ASCII), and the 100 two-digit strings "00".."99".
A run of digits is cut into two-digit tokens from the left ("1234" -> "12" "34", "123" -> "12" "3"), the rest is
one token per character. Nothing is trained and the vocabulary never depends on the data. Number tokens matter
for a tiny model: "37" -> "38" is one learned successor instead of carry logic over two characters, and copying
a number is one look-up (measured while designing the task: per-digit copies from the question were the slowest
thing for the 2-layer model to learn). Qwen2's chat markup is kept (`<|im_start|>role\\n ... <|im_end|>`,
`<think> ... </think>`) so SFT masking, answer extraction ("remove until </think>") and the reward work as in
the real recipe.
"""
import json
import os

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CHARS = ["\n"] + [chr(c) for c in range(32, 127)]
NUMBERS = [f"{n:02d}" for n in range(100)]

CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


class Tokenizer:
    def __init__(self):
        self.id_to_token = SPECIALS + CHARS + NUMBERS
        self.token_to_id = {t: i for i, t in enumerate(self.id_to_token)}
        self.eod = self.token_to_id["<|endoftext|>"]  # document separator in CPT, padding everywhere
        self.pad = self.eod
        self.im_start = self.token_to_id["<|im_start|>"]
        self.im_end = self.token_to_id["<|im_end|>"]  # end of an assistant turn: generation stops here
        self.think_end = self.token_to_id["</think>"]
        self.unk = self.token_to_id["?"]

    @property
    def vocab_size(self) -> int:
        return len(self.id_to_token)

    def encode(self, text: str) -> list:
        ids, i = [], 0
        while i < len(text):
            if text[i] == "<":
                for s in SPECIALS:
                    if text.startswith(s, i):
                        ids.append(self.token_to_id[s])
                        i += len(s)
                        break
                else:
                    ids.append(self.token_to_id["<"])
                    i += 1
                continue
            if text[i].isdigit() and i + 1 < len(text) and text[i + 1].isdigit():
                ids.append(self.token_to_id[text[i:i + 2]])
                i += 2
                continue
            ids.append(self.token_to_id.get(text[i], self.unk))
            i += 1
        return ids

    def decode(self, ids) -> str:
        n = len(self.id_to_token)
        return "".join(self.id_to_token[i] for i in ids if 0 <= i < n)  # ids >= n are vocab padding

    # ---- chat -------------------------------------------------------------------------------------------------
    def chat_prompt(self, question: str) -> list:
        """User turn + the assistant header: what the model continues from (slime --apply-chat-template)."""
        return self.encode(f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n")

    def chat_example(self, messages: list):
        """Token ids and a loss mask that is 1 on assistant content and its <|im_end|> (slime's qwen loss mask)."""
        ids, mask = [], []
        for m in messages:
            head = self.encode(f"<|im_start|>{m['role']}\n")
            body = self.encode(m["content"]) + [self.im_end]
            tail = self.encode("\n")
            train = 1 if m["role"] == "assistant" else 0
            ids += head + body + tail
            mask += [0] * len(head) + [train] * len(body) + [0] * len(tail)
        return ids, mask

    # ---- HF files ---------------------------------------------------------------------------------------------
    def save_pretrained(self, out_dir: str):
        """tokenizer.json (HF `tokenizers` schema: WordLevel over characters and two-digit numbers), tokenizer_config.json with
        Qwen2's chat template, special_tokens_map.json."""
        n_special = len(SPECIALS)
        tok = {
            "version": "1.0",
            "truncation": None,
            "padding": None,
            "added_tokens": [
                {"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": True} for i, s in enumerate(SPECIALS)],
            "normalizer": None,
            "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "[0-9]{2}|(?s)."}, "behavior": "Isolated",
                              "invert": False},
            "post_processor": None,
            "decoder": {"type": "Fuse"},
            "model": {"type": "WordLevel", "unk_token": "?",
                      "vocab": {c: n_special + i for i, c in enumerate(CHARS + NUMBERS)}},
        }
        cfg = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": None,
            "eos_token": "<|im_end|>",
            "pad_token": "<|endoftext|>",
            "unk_token": "?",
            "model_max_length": 4096,
            "chat_template": CHAT_TEMPLATE,
            "added_tokens_decoder": {str(i): {"content": s, "special": True} for i, s in enumerate(SPECIALS)},
        }
        special = {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>",
                   "additional_special_tokens": ["<|im_start|>", "<|im_end|>", "<think>", "</think>"]}
        for name, obj in [("tokenizer.json", tok), ("tokenizer_config.json", cfg),
                          ("special_tokens_map.json", special)]:
            with open(os.path.join(out_dir, name), "w") as f:
                json.dump(obj, f, indent=1, sort_keys=False)
                f.write("\n")

    @classmethod
    def from_pretrained(cls, hf_dir: str) -> "Tokenizer":
        """Check that an HF dir carries this tokenizer (same specials and vocab) and return it."""
        path = os.path.join(hf_dir, "tokenizer.json")
        with open(path) as f:
            tok = json.load(f)
        t = cls()
        specials = [a["content"] for a in sorted(tok["added_tokens"], key=lambda a: a["id"])]
        vocab = tok["model"]["vocab"]
        if specials != SPECIALS or any(vocab.get(c) != t.token_to_id[c] for c in CHARS + NUMBERS):
            raise ValueError(f"{path} is not this trainer's tokenizer")
        return t
