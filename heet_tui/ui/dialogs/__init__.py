"""Small modal screens, one per file: confirm, tweak, host form, host key, help, prompts."""
