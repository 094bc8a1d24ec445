/* A token-tick mock LLM server for benchmarks/client_overhead.py (#43 item 1).
 *
 * One thread, epoll, non-blocking sockets, HTTP/1.1 keep-alive. A timerfd (CLOCK_MONOTONIC,
 * absolute, periodic) ticks every --interval-us; on each tick the server writes one token
 * event to every open stream, in one send() each (TCP_NODELAY: one segment a token). A
 * request's HTTP head (and, for the Anthropic API, message_start, content_block_start and
 * ping) goes out as soon as the request is read; its first token at the next tick; its last
 * token and the stream's tail (content_block_stop, message_delta with usage, message_stop;
 * or the finish chunk, the usage chunk and `data: [DONE]`) in one write at its N-th tick.
 *
 * Event shapes are the reference server's (reference_server/anthropic_api.py and
 * openai_api.py), which zqbench's dialects parse. The OpenAI role chunk goes out with the
 * first token, in the same write, as vLLM does, so that a client stamping TTFT at the first
 * chunk and one stamping it at the first content stamp the same moment.
 *
 * Every token write is stamped (CLOCK_MONOTONIC ns, the clock of Python's perf_counter_ns,
 * right after its send() returns) and logged, so the client side can compare its own times
 * with the server's: <log>.tokens (binary records: u32 seq, u32 index | deferred << 31,
 * i64 t_ns; `deferred`: the socket had not taken the previous bytes yet, the token was
 * queued behind them, i.e. the client was behind), <log>.requests (CSV: seq, x-request-id,
 * api, n tokens, t_recv_ns (request fully read), t_head_ns), <log>.ticks (binary: i64
 * deadline_ns, lateness_ns (tick handled minus its deadline), writes_ns (from the tick's
 * handling to its last write), streams written).
 *
 *   tickserver serve PORT INTERVAL_US DEFAULT_TOKENS LOG_PREFIX [MAX_SECONDS] [TOKEN_TEXT]
 *   tickserver sink PORT STREAMS TOKENS SECONDS API    (a C client: the server measured alone)
 *
 * A request's tokens: "max_tokens" (or "max_completion_tokens") from its JSON body when
 * present, else DEFAULT_TOKENS. Stops on SIGTERM/SIGINT or after MAX_SECONDS, flushing logs.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_IN (1 << 20)
#define API_ANTHROPIC 1
#define API_OPENAI 2

typedef struct {
    char *p;
    size_t len, cap;
} buf_t;

typedef struct conn {
    int fd;
    int streaming;  // 1 while its tokens are being ticked out
    int want_out;   // EPOLLOUT armed
    int close_after;
    int active_idx;
    int dead;  // closed in this epoll batch; freed after it (its event may still be in the batch)
    struct conn *next_dead;
    buf_t in;
    buf_t out;
    size_t out_off;
    uint32_t seq;
    int api, tokens, sent, include_usage;
    char id[48];
    char model[72];
} conn_t;

static volatile sig_atomic_t stop_flag = 0;
static void on_signal(int s) { (void)s; stop_flag = 1; }

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void buf_reserve(buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra) cap *= 2;
    b->p = realloc(b->p, cap);
    if (!b->p) { perror("realloc"); exit(3); }
    b->cap = cap;
}
static void buf_add(buf_t *b, const char *s, size_t n) {
    buf_reserve(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}
/* One HTTP/1.1 chunk holding `n` bytes of `s`. */
static void add_chunk(buf_t *b, const char *s, size_t n) {
    char h[24];
    int k = snprintf(h, sizeof h, "%zx\r\n", n);
    buf_add(b, h, (size_t)k);
    buf_add(b, s, n);
    buf_add(b, "\r\n", 2);
}

/* ---- server state ---- */
static int epfd, lfd, tfd;
static int64_t interval_ns, t_start;
static int default_tokens = 100;
static const char *token_text = " the";
static conn_t **active;
static int n_active, cap_active;
static uint32_t next_seq = 1;
static FILE *f_tokens, *f_requests, *f_ticks;
static uint64_t deferred_tokens, total_tokens;
static char anth_delta[256];
static size_t anth_delta_len;

static void set_out(conn_t *c, int on) {
    if (c->want_out == on) return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_MOD, c->fd, &ev);
    c->want_out = on;
}

static void active_remove(conn_t *c) {
    if (c->active_idx < 0) return;
    conn_t *last = active[--n_active];
    active[c->active_idx] = last;
    last->active_idx = c->active_idx;
    c->active_idx = -1;
    c->streaming = 0;
}

static conn_t *graveyard;

static void conn_close(conn_t *c) {
    if (c->dead) return;
    active_remove(c);
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->dead = 1;
    c->next_dead = graveyard;
    graveyard = c;
}

static void bury(void) {
    while (graveyard) {
        conn_t *c = graveyard;
        graveyard = c->next_dead;
        free(c->in.p);
        free(c->out.p);
        free(c);
    }
}

/* Send what is queued; 0 ok (maybe partial, EPOLLOUT armed), -1 the connection is gone. */
static int flush_out(conn_t *c) {
    while (c->out_off < c->out.len) {
        ssize_t n = send(c->fd, c->out.p + c->out_off, c->out.len - c->out_off, MSG_NOSIGNAL);
        if (n > 0) {
            c->out_off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_out(c, 1);
            return 0;
        }
        return -1;
    }
    c->out.len = c->out_off = 0;
    set_out(c, 0);
    if (c->close_after && !c->streaming) return -1;
    return 0;
}

/* A case-insensitive search for a header's value in the head [p, p+n); copies it to dst. */
static int header_value(const char *p, size_t n, const char *name, char *dst, size_t cap) {
    size_t nl = strlen(name);
    const char *end = p + n;
    const char *line = memchr(p, '\n', n);  // skip the request line
    while (line && line + 1 < end) {
        line++;
        if ((size_t)(end - line) > nl + 1 && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < end && (*v == ' ' || *v == '\t')) v++;
            const char *e = v;
            while (e < end && *e != '\r' && *e != '\n') e++;
            size_t k = (size_t)(e - v);
            if (k >= cap) k = cap - 1;
            memcpy(dst, v, k);
            dst[k] = 0;
            return 1;
        }
        line = memchr(line, '\n', (size_t)(end - line));
    }
    return 0;
}

/* The value after "key" and its colon in a JSON body (no nesting awareness; enough here). */
static const char *json_after(const char *body, size_t n, const char *key) {
    size_t kl = strlen(key);
    const char *end = body + n;
    for (const char *p = body; p + kl <= end; p++) {
        p = memmem(p, (size_t)(end - p), key, kl);
        if (!p) return NULL;
        const char *q = p + kl;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
        if (q < end && *q == ':') {
            q++;
            while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q++;
            return q < end ? q : NULL;
        }
    }
    return NULL;
}

static void respond_simple(conn_t *c, int status, const char *reason, const char *body) {
    char h[256];
    size_t bl = strlen(body);
    int k = snprintf(h, sizeof h,
                     "HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %zu\r\n%s\r\n",
                     status, reason, bl, c->close_after ? "connection: close\r\n" : "");
    buf_add(&c->out, h, (size_t)k);
    buf_add(&c->out, body, bl);
}

static void log_request(conn_t *c, int64_t t_recv, int64_t t_head, const char *xid) {
    fprintf(f_requests, "%u,%s,%s,%d,%lld,%lld\n", c->seq, xid,
            c->api == API_ANTHROPIC ? "anthropic" : "openai", c->tokens, (long long)t_recv,
            (long long)t_head);
}

static void openai_chunk(conn_t *c, buf_t *b, const char *delta, const char *finish) {
    char s[768];
    int k = snprintf(s, sizeof s,
                     "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\",\"created\":1700000000,"
                     "\"model\":\"%s\",\"system_fingerprint\":null,\"choices\":[{\"index\":0,"
                     "\"delta\":%s,\"logprobs\":null,\"finish_reason\":%s}]%s}\n\n",
                     c->id, c->model, delta, finish, c->include_usage ? ",\"usage\":null" : "");
    add_chunk(b, s, (size_t)k);
}

/* The request in c->in is complete (head_len bytes of head, body_len of body). */
static int handle_request(conn_t *c, size_t head_len, size_t body_len) {
    int64_t t_recv = now_ns();
    const char *p = c->in.p;
    char xid[64] = "-", conn_hdr[32] = "";
    header_value(p, head_len, "x-request-id", xid, sizeof xid);
    for (char *q = xid; *q; q++)
        if (*q == ',' || *q == '\n') *q = '_';
    if (header_value(p, head_len, "connection", conn_hdr, sizeof conn_hdr) &&
        strncasecmp(conn_hdr, "close", 5) == 0)
        c->close_after = 1;
    int is_post = strncmp(p, "POST ", 5) == 0;
    const char *path = strchr(p, ' ');
    path = path ? path + 1 : p;
    const char *body = p + head_len;
    int api = 0;
    if (is_post && strncmp(path, "/v1/messages", 12) == 0 && (path[12] == ' ' || path[12] == '?'))
        api = API_ANTHROPIC;
    else if (is_post && strncmp(path, "/v1/chat/completions", 20) == 0)
        api = API_OPENAI;
    if (!api) {
        if (strncmp(p, "GET /v1/models", 14) == 0)
            respond_simple(c, 200, "OK",
                           "{\"object\":\"list\",\"data\":[{\"id\":\"mock\",\"object\":\"model\","
                           "\"created\":0,\"owned_by\":\"tickserver\"}]}");
        else if (strncmp(p, "GET /health", 11) == 0)
            respond_simple(c, 200, "OK", "{}");
        else
            respond_simple(c, 404, "Not Found",
                           "{\"error\":{\"type\":\"not_found_error\",\"message\":\"no such route\"}}");
        return 0;
    }
    c->api = api;
    c->seq = next_seq++;
    c->tokens = default_tokens;
    const char *v = json_after(body, body_len, "\"max_completion_tokens\"");
    if (!v) v = json_after(body, body_len, "\"max_tokens\"");
    if (v && *v >= '0' && *v <= '9') {
        long t = strtol(v, NULL, 10);
        if (t >= 1 && t <= 1000000) c->tokens = (int)t;
    }
    v = json_after(body, body_len, "\"stream\"");
    int stream = v && *v == 't';
    v = json_after(body, body_len, "\"include_usage\"");
    c->include_usage = v && *v == 't';
    snprintf(c->model, sizeof c->model, "mock");
    v = json_after(body, body_len, "\"model\"");
    if (v && *v == '"') {
        const char *e = memchr(v + 1, '"', (size_t)(body + body_len - v - 1));
        if (e && e - v - 1 < (long)sizeof c->model && !memchr(v + 1, '\\', (size_t)(e - v - 1))) {
            memcpy(c->model, v + 1, (size_t)(e - v - 1));
            c->model[e - v - 1] = 0;
        }
    }
    snprintf(c->id, sizeof c->id, "%s%u", api == API_ANTHROPIC ? "msg_" : "chatcmpl-", c->seq);
    if (!stream) {  // a JSON body at once, no ticks
        buf_t text = {0};
        for (int i = 0; i < c->tokens; i++) buf_add(&text, token_text, strlen(token_text));
        buf_add(&text, "", 1);
        buf_t b = {0};
        buf_reserve(&b, text.len + 1024);
        int k;
        if (api == API_ANTHROPIC)
            k = snprintf(b.p, b.cap,
                         "{\"id\":\"%s\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"%s\","
                         "\"content\":[{\"type\":\"text\",\"text\":\"%s\"}],\"stop_reason\":\"max_tokens\","
                         "\"stop_sequence\":null,\"usage\":{\"input_tokens\":16,\"output_tokens\":%d}}",
                         c->id, c->model, text.p, c->tokens);
        else
            k = snprintf(b.p, b.cap,
                         "{\"id\":\"%s\",\"object\":\"chat.completion\",\"created\":1700000000,"
                         "\"model\":\"%s\",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\","
                         "\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":\"length\"}],"
                         "\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,\"total_tokens\":%d}}",
                         c->id, c->model, text.p, c->tokens, c->tokens + 16);
        respond_simple(c, 200, "OK", b.p);
        (void)k;
        free(text.p);
        free(b.p);
        log_request(c, t_recv, now_ns(), xid);
        return 0;
    }
    char h[256];
    int k = snprintf(h, sizeof h,
                     "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
                     "x-request-id: %s\r\ntransfer-encoding: chunked\r\n%s\r\n",
                     xid, c->close_after ? "connection: close\r\n" : "");
    buf_add(&c->out, h, (size_t)k);
    if (api == API_ANTHROPIC) {
        char s[1024];
        k = snprintf(s, sizeof s,
                     "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"%s\","
                     "\"type\":\"message\",\"role\":\"assistant\",\"model\":\"%s\",\"content\":[],"
                     "\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":16,"
                     "\"output_tokens\":0,\"cache_creation_input_tokens\":0,\"cache_read_input_tokens\":0}}}\n\n"
                     "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,"
                     "\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
                     "event: ping\ndata: {\"type\":\"ping\"}\n\n",
                     c->id, c->model);
        add_chunk(&c->out, s, (size_t)k);
    }
    c->sent = 0;
    c->streaming = 1;
    if (n_active == cap_active) {
        cap_active = cap_active ? cap_active * 2 : 1024;
        active = realloc(active, sizeof *active * (size_t)cap_active);
    }
    c->active_idx = n_active;
    active[n_active++] = c;
    int64_t t_head = now_ns();
    log_request(c, t_recv, t_head, xid);
    return 0;
}

/* Parse as many complete requests as c->in holds (a client does not pipeline while a
 * stream is open; bytes that arrive then wait in c->in until it ends). */
static int try_requests(conn_t *c) {
    while (!c->streaming && c->in.len > 0) {
        char *end = memmem(c->in.p, c->in.len, "\r\n\r\n", 4);
        if (!end) return c->in.len > 65536 ? -1 : 0;
        size_t head_len = (size_t)(end - c->in.p) + 4;
        char cl[32] = "0";
        header_value(c->in.p, head_len, "content-length", cl, sizeof cl);
        long body_len = strtol(cl, NULL, 10);
        if (body_len < 0 || body_len > MAX_IN) return -1;
        if (c->in.len < head_len + (size_t)body_len) return 0;
        if (handle_request(c, head_len, (size_t)body_len) < 0) return -1;
        size_t used = head_len + (size_t)body_len;
        memmove(c->in.p, c->in.p + used, c->in.len - used);
        c->in.len -= used;
        if (flush_out(c) < 0) return -1;
    }
    return 0;
}

static void on_readable(conn_t *c) {
    for (int i = 0; i < 64; i++) {
        buf_reserve(&c->in, 16384);
        ssize_t n = recv(c->fd, c->in.p + c->in.len, c->in.cap - c->in.len, 0);
        if (n > 0) {
            c->in.len += (size_t)n;
            if (c->in.len > MAX_IN + 65536) { conn_close(c); return; }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        conn_close(c);  // EOF or error
        return;
    }
    if (try_requests(c) < 0) conn_close(c);
}

typedef struct {
    uint32_t seq, idx;
    int64_t t;
} tokrec_t;

static void on_tick(void) {
    uint64_t expirations = 0;
    if (read(tfd, &expirations, sizeof expirations) != sizeof expirations) return;
    static int64_t k = 0;  // ticks handled
    int64_t t0 = now_ns();
    int64_t deadline = t_start + (k + 1) * interval_ns;  // the first one due, missed or not
    k += (int64_t)expirations;
    int written = 0;
    // Iterate over a snapshot: finished streams leave `active` (swap-removal) as we go.
    for (int i = 0; i < n_active;) {
        conn_t *c = active[i];
        int deferred = c->out_off < c->out.len;
        c->sent++;
        if (c->api == API_ANTHROPIC) {
            add_chunk(&c->out, anth_delta, anth_delta_len);
        } else {
            char delta[160];
            if (c->sent == 1)  // the role chunk with the first token, as vLLM writes it
                openai_chunk(c, &c->out, "{\"role\":\"assistant\",\"content\":\"\"}", "null");
            snprintf(delta, sizeof delta, "{\"content\":\"%s\"}", token_text);
            openai_chunk(c, &c->out, delta, "null");
        }
        int last = c->sent >= c->tokens;
        if (last) {
            if (c->api == API_ANTHROPIC) {
                char s[768];
                int n = snprintf(s, sizeof s,
                                 "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n"
                                 "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":"
                                 "{\"stop_reason\":\"max_tokens\",\"stop_sequence\":null},\"usage\":"
                                 "{\"input_tokens\":16,\"output_tokens\":%d,\"cache_creation_input_tokens\":0,"
                                 "\"cache_read_input_tokens\":0}}\n\n"
                                 "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
                                 c->tokens);
                add_chunk(&c->out, s, (size_t)n);
            } else {
                openai_chunk(c, &c->out, "{}", "\"length\"");
                if (c->include_usage) {
                    char s[512];
                    int n = snprintf(s, sizeof s,
                                     "data: {\"id\":\"%s\",\"object\":\"chat.completion.chunk\","
                                     "\"created\":1700000000,\"model\":\"%s\",\"system_fingerprint\":null,"
                                     "\"choices\":[],\"usage\":{\"prompt_tokens\":16,\"completion_tokens\":%d,"
                                     "\"total_tokens\":%d,\"prompt_tokens_details\":{\"cached_tokens\":0}}}\n\n",
                                     c->id, c->model, c->tokens, c->tokens + 16);
                    add_chunk(&c->out, s, (size_t)n);
                }
                add_chunk(&c->out, "data: [DONE]\n\n", 14);
            }
            buf_add(&c->out, "0\r\n\r\n", 5);
            active_remove(c);  // active[i] is now another stream: do not advance i
        }
        int gone = flush_out(c) < 0;
        if (!last && !gone) i++;  // (a gone one leaves active[i] below: stay at i)
        tokrec_t r = {c->seq, (uint32_t)(c->sent - 1) | ((uint32_t)deferred << 31), now_ns()};
        fwrite(&r, sizeof r, 1, f_tokens);
        total_tokens++;
        deferred_tokens += (uint64_t)deferred;
        written++;
        if (gone) {
            conn_close(c);
            continue;
        }
        if (last && c->in.len > 0 && try_requests(c) < 0) conn_close(c);
    }
    int64_t t1 = now_ns();
    int64_t rec[4] = {deadline, t0 - deadline, t1 - t0, written};
    fwrite(rec, sizeof rec, 1, f_ticks);
}

static int listen_on(int port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 4096) < 0) {
        perror("bind/listen");
        exit(2);
    }
    return fd;
}

static int serve(int argc, char **argv) {
    if (argc < 6) return 64;
    int port = atoi(argv[2]);
    interval_ns = atoll(argv[3]) * 1000LL;
    default_tokens = atoi(argv[4]);
    const char *prefix = argv[5];
    double max_s = argc > 6 ? atof(argv[6]) : 3600.0;
    if (argc > 7) token_text = argv[7];
    anth_delta_len = (size_t)snprintf(
        anth_delta, sizeof anth_delta,
        "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,"
        "\"delta\":{\"type\":\"text_delta\",\"text\":\"%s\"}}\n\n",
        token_text);
    char path[4096];
    snprintf(path, sizeof path, "%s.tokens", prefix);
    f_tokens = fopen(path, "wb");
    snprintf(path, sizeof path, "%s.requests", prefix);
    f_requests = fopen(path, "w");
    snprintf(path, sizeof path, "%s.ticks", prefix);
    f_ticks = fopen(path, "wb");
    if (!f_tokens || !f_requests || !f_ticks) { perror("log files"); return 2; }
    setvbuf(f_tokens, NULL, _IOFBF, 1 << 22);
    setvbuf(f_ticks, NULL, _IOFBF, 1 << 20);
    setvbuf(f_requests, NULL, _IOFBF, 1 << 20);
    fprintf(f_requests, "seq,x_request_id,api,tokens,t_recv_ns,t_head_ns\n");

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    epfd = epoll_create1(0);
    lfd = listen_on(port);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &lfd};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
    t_start = now_ns();
    struct itimerspec its = {
        .it_interval = {interval_ns / 1000000000LL, interval_ns % 1000000000LL},
        .it_value = {(t_start + interval_ns) / 1000000000LL, (t_start + interval_ns) % 1000000000LL},
    };
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
    ev.events = EPOLLIN;
    ev.data.ptr = &tfd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev);
    printf("listening %d\n", port);
    fflush(stdout);

    int64_t t_stop = t_start + (int64_t)(max_s * 1e9);
    struct epoll_event evs[512];
    while (!stop_flag && now_ns() < t_stop) {
        int n = epoll_wait(epfd, evs, 512, 200);
        if (n < 0) {
            if (errno == EINTR) continue;
            perror("epoll_wait");
            break;
        }
        for (int i = 0; i < n; i++)  // the tick first: it is what is measured
            if (evs[i].data.ptr == &tfd) on_tick();
        for (int i = 0; i < n; i++) {
            void *ptr = evs[i].data.ptr;
            if (ptr == &tfd) continue;
            if (ptr == &lfd) {
                for (int j = 0; j < 1024; j++) {
                    int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
                    if (fd < 0) break;
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    conn_t *c = calloc(1, sizeof *c);
                    c->fd = fd;
                    c->active_idx = -1;
                    struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &cev);
                }
                continue;
            }
            conn_t *c = ptr;
            if (c->dead) continue;  // closed by the tick earlier in this batch
            if (evs[i].events & EPOLLOUT) {
                if (flush_out(c) < 0) { conn_close(c); continue; }
                if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) on_readable(c);
            } else if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                on_readable(c);
            }
        }
        bury();
    }
    fflush(f_tokens);
    fclose(f_tokens);
    fclose(f_requests);
    fclose(f_ticks);
    fprintf(stderr, "tickserver: %llu tokens written, %llu deferred (client behind)\n",
            (unsigned long long)total_tokens, (unsigned long long)deferred_tokens);
    return 0;
}

/* ---- sink: a closed-loop C client, to measure the server without a Python client ---- */
typedef struct {
    int fd;
    char tail[5];
    uint64_t responses;
} sconn_t;

static int sink(int argc, char **argv) {
    if (argc < 7) return 64;
    int port = atoi(argv[2]), streams = atoi(argv[3]), tokens = atoi(argv[4]);
    double seconds = atof(argv[5]);
    int anthropic = strcmp(argv[6], "anthropic") == 0;
    char body[256], req[1024];
    int bl = snprintf(body, sizeof body,
                      "{\"model\":\"mock\",\"max_tokens\":%d,\"stream\":true,\"stream_options\":"
                      "{\"include_usage\":true},\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}",
                      tokens);
    int rl = snprintf(req, sizeof req,
                      "POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
                      "content-length: %d\r\n\r\n%s",
                      anthropic ? "/v1/messages" : "/v1/chat/completions", bl, body);
    signal(SIGPIPE, SIG_IGN);
    int ep = epoll_create1(0);
    sconn_t *cs = calloc((size_t)streams, sizeof *cs);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int i = 0; i < streams; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) { perror("connect"); return 2; }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        fcntl(fd, F_SETFL, O_NONBLOCK);
        cs[i].fd = fd;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &cs[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
        if (send(fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) { perror("send"); return 2; }
    }
    int64_t t_end = now_ns() + (int64_t)(seconds * 1e9);
    uint64_t bytes = 0, responses = 0;
    static char rb[1 << 16];
    struct epoll_event evs[512];
    while (now_ns() < t_end) {
        int n = epoll_wait(ep, evs, 512, 100);
        for (int i = 0; i < n; i++) {
            sconn_t *s = evs[i].data.ptr;
            for (;;) {
                ssize_t k = recv(s->fd, rb, sizeof rb, 0);
                if (k <= 0) break;
                bytes += (uint64_t)k;
                // The end of a chunked response: "0\r\n\r\n" closing a read (no pipelining).
                char last[5];
                if (k >= 5) memcpy(last, rb + k - 5, 5);
                else {
                    memmove(s->tail, s->tail + k, (size_t)(5 - k));
                    memcpy(s->tail + 5 - k, rb, (size_t)k);
                    memcpy(last, s->tail, 5);
                }
                memcpy(s->tail, last, 5);
                if (memcmp(last, "0\r\n\r\n", 5) == 0) {
                    responses++;
                    memset(s->tail, 0, 5);
                    if (send(s->fd, req, (size_t)rl, MSG_NOSIGNAL) != rl) return 2;
                }
            }
        }
    }
    printf("{\"responses\": %llu, \"bytes\": %llu}\n", (unsigned long long)responses,
           (unsigned long long)bytes);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    if (argc > 1 && strcmp(argv[1], "sink") == 0) return sink(argc, argv);
    fprintf(stderr, "usage: tickserver serve PORT INTERVAL_US TOKENS LOG_PREFIX [MAX_S] [TEXT]\n"
                    "       tickserver sink PORT STREAMS TOKENS SECONDS anthropic|openai\n");
    return 64;
}
