# The bot's image: python -m bot (polling by default; "webhook" as the command for webhook mode).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# The dependencies change less often than the code: their layer is reused across code edits.
COPY pyproject.toml README.md ./
RUN mkdir bot tools prompts \
    && touch bot/__init__.py tools/__init__.py prompts/__init__.py \
    && pip install . \
    && pip uninstall -y support-bot \
    && rm -rf bot tools prompts

COPY bot ./bot
COPY tools ./tools
COPY prompts ./prompts
RUN pip install --no-deps .

# Never run as root: the bot needs no privilege at all.
RUN useradd --create-home --uid 10001 --shell /usr/sbin/nologin bot
USER bot
WORKDIR /home/bot

# The webhook server's port (WEBHOOK_PORT); polling listens on nothing.
EXPOSE 8080

ENTRYPOINT ["python", "-m", "bot"]
CMD ["polling"]
