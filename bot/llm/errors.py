"""The LLM client's errors: nothing above the client imports the SDK's exceptions."""


class LLMClientError(RuntimeError):
    """Base of every failure to get a usable answer from the model."""


class LLMTimeoutError(LLMClientError):
    """The model did not answer in time (after the SDK's retries)."""


class LLMRateLimitError(LLMClientError):
    """The provider said 429 (after the SDK's retries)."""


class LLMUnavailableError(LLMClientError):
    """The provider could not be reached or answered 5xx (after the SDK's retries)."""


class LLMRequestError(LLMClientError):
    """The provider refused the request itself (4xx: context too long, bad key, bad model)."""


class LLMBadResponseError(LLMClientError):
    """The provider answered something that is not a usable chat completion."""
