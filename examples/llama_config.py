"""Llama 3.2's architecture (GQA, RoPE with Llama 3 scaling, RMSNorm, SwiGLU, tied embeddings),
scaled down so a fine-tune runs in minutes on two CPU cores."""

from instruct_data import CHARS, EOS, PAD
from transformers import LlamaConfig


def small_llama_config() -> LlamaConfig:
    return LlamaConfig(
        vocab_size=len(CHARS),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rope_theta=500000.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        pad_token_id=PAD,
        eos_token_id=EOS,
        bos_token_id=None,
        attn_implementation="sdpa",
    )
