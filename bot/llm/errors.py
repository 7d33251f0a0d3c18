"""The LLM client's errors: nothing above the client imports the SDK's exceptions."""


class LLMClientError(RuntimeError):
    """Base of every failure to get a usable answer from the model."""


class LLMTimeoutError(LLMClientError):
    """The model did not answer in time (after the SDK's retries)."""


class LLMRateLimitError(LLMClientError):
    """The provider said 429 (after the SDK's retries)."""


class LLMUnavailableError(LLMClientError):
    """The provider could not be reached or answered 5xx (after the SDK's retries)."""


class LLMUnreachableError(LLMUnavailableError):
    """No connection to the provider at all (refused, no such host, a proxy that refused)."""


class LLMRequestError(LLMClientError):
    """The provider refused the request itself (4xx: context too long, bad key, bad model)."""


class LLMConfigurationError(LLMRequestError):
    """The provider refused the key or does not know the model (401, 403, 404).

    No retry helps: ``OPENAI_API_KEY``, ``LLM_MODEL`` or ``OPENAI_BASE_URL`` is wrong.
    """


class LLMBadResponseError(LLMClientError):
    """The provider answered something that is not a usable chat completion."""
