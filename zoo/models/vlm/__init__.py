"""Video-LLM backbones: a vision tower (any zoo / timm image or video model), Qwen2-VL's 2x2 merge projector, and a
decoder (RMSNorm, SwiGLU, GQA, tied embeddings, KV cache) whose rotation is a multimodal RoPE scheme by name.

``create_video_llm('pe_vlm_tiny_videorope')``; ``list_video_llms()`` gives every ``pe_vlm_{tiny,small}_{scheme}``.
"""
from .generation import GenerateOutput, generate, select_next_token
from .model import VLM_SIZES, VideoLLM, VLMOutput, create_video_llm, list_video_llms, video_llm_config, vlm_schemes
from .projector import PatchMerger
from .tokenizer import IGNORE_INDEX, SPECIAL_TOKENS, PromptInputs, VLMTokenizer, build_prompt, collate_prompts
from .tower import VisionTower

__all__ = ['VideoLLM', 'VLMOutput', 'GenerateOutput', 'VLM_SIZES', 'create_video_llm', 'video_llm_config',
           'list_video_llms', 'vlm_schemes', 'generate', 'select_next_token', 'PatchMerger', 'VisionTower',
           'VLMTokenizer', 'PromptInputs', 'build_prompt', 'collate_prompts', 'IGNORE_INDEX', 'SPECIAL_TOKENS']
