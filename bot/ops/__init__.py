"""Operations: metrics, logs, start-up, supervision, retries, proxies, redaction."""
