/* dist/dist_mpi.c: MPI for sluice: rank discovery for shard "auto", and the offload transport. Trainer ranks
 * (the first size-K) receive elements from worker ranks (the last K), which run the part of the spec above the
 * `offload` op. Wire format and protocol are below; every MPI call goes through one mutex (MPI_THREAD_SERIALIZED). */
#include <errno.h>
#include <mpi.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dist/dist_int.h"
#include "ops/dist_hook_int.h"
#include "ops/pipeline_int.h"

/* Protocol (tags on MPI_COMM_WORLD):
 *  trainer -> worker  CREDIT (int32 n): n more elements may be sent to me; STOP (int32 lost): I take no more, and
 *                     (lost != 0) a rank of the job died.
 *  worker -> trainer  DATA (a packed element); END: no more from me (the stream ended, or the answer to STOP);
 *                     ERROR (text): the worker's pipeline failed, nothing more follows; BEAT: I am alive.
 * Each trainer grants every worker WINDOW credits and returns them as it consumes, so at most WINDOW elements per
 * (trainer, worker) pair are in flight: a slow trainer slows the workers, and memory stays bounded. A worker sends
 * its next element to a trainer holding credit, round-robin: trainers share workers by demand. A trainer that
 * stops sends STOP and drains what is in flight until every worker's END, so that no send is left pending. */
enum { TAG_CREDIT = 7301, TAG_STOP, TAG_DATA, TAG_END, TAG_ERROR, TAG_BEAT, TAG_NONE /* never sent */ };

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* every MPI call */
static int g_rank, g_size, g_workers;
static bool g_inited; /* by us: we finalise */
static bool g_served; /* a worker that reached sl__mpi_serve (it tells the trainers how it ended) */
static pid_t *g_pids;   /* every rank's pid, for a fast liveness check of ranks on this host */
static unsigned long *g_hosts;
/* This rank knows that a rank of the job died. MPI_Finalize is collective (Open MPI 4 fences every rank through
 * PMIx) and without fault tolerance it can wait for the dead rank forever: a rank that knows skips it. */
static atomic_bool g_lost;

static int mpi_err(int rc, const char *what, int peer) {
  char s[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
  if (peer >= 0) return sl__err(SL_EIO, "rank %d: %s: %s", peer, what, s);
  return sl__err(SL_EIO, "%s: %s", what, s);
}

bool sl__mpi_launched(void) {
  const char *v = getenv("OMPI_COMM_WORLD_SIZE");
  if (!v) v = getenv("PMI_SIZE");
  if (!v) v = getenv("PMIX_RANK");
  return v && *v;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}
static void nap(unsigned *us) {
  struct timespec ts = {0, (long)*us * 1000};
  nanosleep(&ts, NULL);
  if (*us < 1000) *us *= 2; /* back off from 50 us to 1.6 ms while nothing arrives */
}

/* A rank on this host whose process is gone (or a zombie): dead for sure, without waiting for a timeout. */
static bool rank_gone(int r) {
  if (!g_pids || g_hosts[r] != g_hosts[g_rank]) return false;
  if (kill(g_pids[r], 0) != 0 && errno == ESRCH) return true;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)g_pids[r]);
  FILE *f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && p[2] == 'Z';
}

/* Seconds without a word from a worker (data or heartbeat) before a waiting trainer declares it dead. */
static double dead_after(void) {
  const char *s = getenv("SLUICE_DIST_TIMEOUT");
  double t = s ? atof(s) : 0;
  return t > 0 ? t : 60;
}
/* Elements in flight per (trainer, worker) pair. */
static int window(void) {
  const char *s = getenv("SLUICE_DIST_WINDOW");
  int w = s ? atoi(s) : 0;
  return w > 0 && w <= 4096 ? w : 16;
}

/* ---------------- trainer: the stream an offload op reads ---------------- */
/* A receive posted for a matched message (MPI_Imrecv): the trainer never waits inside MPI. A blocking receive of a
 * large message spun in Open MPI's progress loop until the worker's next MPI call sent the rest of it: on imagenet
 * 60% of the pinned trainer's CPU, taken from its own ops. */
typedef struct {
  MPI_Request req;
  sl_buf *b;
  int from, tag, count;
} rpend;

typedef struct {
  sl__op *op;
  int nw, first;       /* workers: ranks first .. first+nw-1 */
  int win;
  int *owed;           /* credits consumed and not yet returned, per worker */
  bool *ended;         /* END or ERROR seen (or dead) */
  double *heard;       /* when each worker was last heard from */
  int live;            /* workers not ended */
  bool failed;
  rpend *q;            /* receives posted, in the order MPI matched them: a worker's END follows its data */
  int qh, qn, qcap;
} tstream;
static bool g_stream_used; /* one stream per trainer process: the workers' stream ends once */

static const char *intern(void *op, const char *name, size_t len) { return sl__op_intern(op, name, len); }

static int send_small(int to, int tag, int32_t v) {
  pthread_mutex_lock(&g_mu);
  int rc = MPI_Send(&v, 1, MPI_INT32_T, to, tag, MPI_COMM_WORLD);
  pthread_mutex_unlock(&g_mu);
  return rc == MPI_SUCCESS ? 0 : mpi_err(rc, tag == TAG_CREDIT ? "sending credit" : "sending stop", to);
}

static int t_open(void **stream, sl__op *op, void *payload) {
  *stream = NULL;
  if (g_stream_used)
    return sl__op_err(op, SL_EINVAL, "the workers' stream was already read to its end by this trainer: a repeat "
                      "of the offloaded part belongs above the offload op");
  tstream *s = sl__calloc(1, sizeof *s);
  if (!s) return sl__oom("an offload stream");
  s->op = op;
  s->nw = g_workers;
  s->first = g_size - g_workers;
  s->win = window();
  s->owed = sl__calloc((size_t)s->nw, sizeof *s->owed);
  s->ended = sl__calloc((size_t)s->nw, sizeof *s->ended);
  s->heard = sl__calloc((size_t)s->nw, sizeof *s->heard);
  s->qcap = s->nw * (s->win + 4); /* the data in flight, plus each worker's END and heartbeats */
  s->q = sl__calloc((size_t)s->qcap, sizeof *s->q);
  if (!s->owed || !s->ended || !s->heard || !s->q) {
    sl__free(s->owed);
    sl__free(s->ended);
    sl__free(s->heard);
    sl__free(s->q);
    sl__free(s);
    return sl__oom("an offload stream");
  }
  s->live = s->nw;
  g_stream_used = true;
  double t = now_s();
  for (int w = 0; w < s->nw; w++) {
    s->heard[w] = t;
    int rc = send_small(s->first + w, TAG_CREDIT, s->win);
    if (rc) {
      s->ended[w] = true; /* do not wait for it at close */
      s->live--;
      *stream = s;
      s->failed = true;
      return rc;
    }
  }
  *stream = s;
  return 0;
}

/* Posts a receive for every message that has arrived (as room in the queue allows). Called with g_mu held. */
static int t_post(tstream *s) {
  while (s->qn < s->qcap) {
    int flag = 0, count = 0;
    MPI_Message m;
    MPI_Status st;
    int rc = MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &m, &st);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "waiting for the workers", -1);
    if (!flag) return 0;
    MPI_Get_count(&st, MPI_BYTE, &count);
    /* a message buffer per element: the element's components point into it, downstream owns it */
    sl_buf *b = sl_buf_alloc(count > 0 ? (size_t)count : 1);
    if (!b) return sl__oom("an offload message");
    rpend *p = &s->q[(s->qh + s->qn) % s->qcap];
    rc = MPI_Imrecv(sl_buf_data(b), count, MPI_BYTE, &m, &p->req);
    if (rc != MPI_SUCCESS) {
      sl_buf_unref(b);
      return mpi_err(rc, "receiving from a worker", st.MPI_SOURCE);
    }
    p->b = b;
    p->from = st.MPI_SOURCE;
    p->tag = st.MPI_TAG;
    p->count = count;
    s->qn++;
  }
  return 0;
}

/* Takes the next received message from any worker into *msg (DATA) or handles it; returns the tag seen, 0 when
 * none is complete yet (*busy: a receive is under way), or an error. */
static int t_poll(tstream *s, sl_buf **msg, int *from, bool *busy) {
  int done = 0;
  *busy = false;
  pthread_mutex_lock(&g_mu);
  int rc = t_post(s);
  if (!rc && s->qn > 0) {
    rpend *p = &s->q[s->qh];
    int mrc = MPI_Test(&p->req, &done, MPI_STATUS_IGNORE);
    if (mrc != MPI_SUCCESS) rc = mpi_err(mrc, "receiving from a worker", p->from);
  }
  pthread_mutex_unlock(&g_mu);
  if (rc) return rc;
  if (!done) {
    *busy = s->qn > 0;
    return 0;
  }
  rpend p = s->q[s->qh];
  s->qh = (s->qh + 1) % s->qcap;
  s->qn--;
  sl_buf *b = p.b;
  int count = p.count;
  *from = p.from;
  int w = *from - s->first;
  if (w < 0 || w >= s->nw) {
    sl_buf_unref(b);
    return sl__err(SL_ECORRUPT, "offload: a message from rank %d, which is not a worker", *from);
  }
  s->heard[w] = now_s();
  if (p.tag == TAG_DATA && count > 0) {
    /* the message buffer's size is what MPI received */
    *msg = b;
    return TAG_DATA;
  }
  if (p.tag == TAG_END || p.tag == TAG_ERROR) {
    if (!s->ended[w]) {
      s->ended[w] = true;
      s->live--;
    }
    if (p.tag == TAG_ERROR) {
      int n = count > 0 ? count : 1;
      char *t = sl_buf_data(b);
      t[n - 1] = 0;
      rc = sl__err(SL_ERROR, "rank %d (worker) failed: %s", *from, count > 1 ? t : "no message");
      sl_buf_unref(b);
      return rc;
    }
  }
  sl_buf_unref(b);
  return p.tag;
}

/* Fails when a worker that has not ended is gone: on this host its process is no more; anywhere, nothing heard
 * from it (no element, no heartbeat) for SLUICE_DIST_TIMEOUT seconds. */
static int t_check(tstream *s) {
  double t = now_s(), lim = dead_after();
  for (int w = 0; w < s->nw; w++) {
    if (s->ended[w]) continue;
    int r = s->first + w;
    if (rank_gone(r)) {
      s->ended[w] = true;
      s->live--;
      atomic_store(&g_lost, true);
      return sl__err(SL_EIO, "rank %d (worker) died: its process is gone", r);
    }
    if (t - s->heard[w] > lim) {
      s->ended[w] = true;
      s->live--;
      atomic_store(&g_lost, true);
      return sl__err(SL_EIO, "rank %d (worker) sent nothing for %.0f s (SLUICE_DIST_TIMEOUT): presumed dead", r, lim);
    }
  }
  return 0;
}

/* Waits a little for the workers. While a receive is under way its data comes as the worker's MPI pushes it:
 * short naps; with nothing under way, the back-off. Checks on the workers at most every 10 ms, so that a worker
 * dead in the middle of a message is noticed too. */
static int t_wait(tstream *s, bool busy, unsigned *us, double *checked) {
  double t = now_s();
  if (!busy || t - *checked > 0.01) {
    *checked = t;
    int rc = t_check(s);
    if (rc) return rc;
  }
  if (busy) {
    unsigned short_us = 20;
    nap(&short_us);
  } else nap(us);
  return 0;
}

static int t_next(void *stream, sl_elem *out) {
  tstream *s = stream;
  if (s->failed) return sl__err(SL_ERROR, "offload: the stream failed earlier");
  unsigned us = 50;
  double checked = now_s();
  for (;;) {
    if (s->live == 0) return SL_END;
    sl_buf *msg = NULL;
    int from = -1;
    bool busy = false;
    int rc = t_poll(s, &msg, &from, &busy);
    if (rc < 0) {
      s->failed = true;
      return rc;
    }
    if (rc == TAG_DATA) {
      rc = sl__dist_unpack(out, msg, intern, s->op, from);
      sl_buf_unref(msg);
      int w = from - s->first;
      if (!rc && ++s->owed[w] * 2 >= s->win) { /* return credits in runs: fewer messages */
        rc = send_small(from, TAG_CREDIT, s->owed[w]);
        s->owed[w] = 0;
        if (rc) sl_elem_clear(out);
      }
      if (rc) s->failed = true;
      return rc;
    }
    if (rc) {
      us = 50;
      continue;
    }
    if ((rc = t_wait(s, busy, &us, &checked)) != 0) {
      s->failed = true;
      return rc;
    }
  }
}

/* Stops the workers for this trainer: STOP to each, then drain (elements in flight are dropped) until each one's
 * END, so that no worker is left with a pending send. A dead worker is not waited for. */
static void t_close(void *stream) {
  tstream *s = stream;
  if (!s) return;
  for (int w = 0; w < s->nw; w++)
    if (!s->ended[w] && send_small(s->first + w, TAG_STOP, atomic_load(&g_lost) ? 1 : 0)) {
      s->ended[w] = true;
      s->live--;
    }
  unsigned us = 50;
  double checked = now_s();
  while (s->live > 0) {
    sl_buf *msg = NULL;
    int from = -1;
    bool busy = false;
    int rc = t_poll(s, &msg, &from, &busy);
    sl_buf_unref(msg);
    if (rc != 0) {
      us = 50;
      continue; /* an error message while draining: that worker has ended; the run's result is already set */
    }
    t_wait(s, busy, &us, &checked); /* a dead worker is marked ended: not waited for */
  }
  /* What is left was matched from a dead worker and may never complete: its buffer stays with MPI. */
  pthread_mutex_lock(&g_mu);
  for (; s->qn > 0; s->qn--, s->qh = (s->qh + 1) % s->qcap) {
    int done = 0;
    if (MPI_Test(&s->q[s->qh].req, &done, MPI_STATUS_IGNORE) == MPI_SUCCESS && done) sl_buf_unref(s->q[s->qh].b);
  }
  pthread_mutex_unlock(&g_mu);
  sl__free(s->q);
  sl__free(s->owed);
  sl__free(s->ended);
  sl__free(s->heard);
  sl__free(s);
}

/* shard "auto": the job's size and rank; with workers, the offload already gives each trainer its own part. */
static int shard_auto(int64_t *num, int64_t *index, void *payload) {
  if (g_workers > 0) {
    *num = 1;
    *index = 0;
  } else {
    *num = g_size;
    *index = g_rank;
  }
  return 0;
}

/* ---------------- init / finalize ---------------- */
static unsigned long host_hash(void) {
  char name[MPI_MAX_PROCESSOR_NAME] = "";
  int len = 0;
  MPI_Get_processor_name(name, &len);
  unsigned long h = 5381;
  for (int i = 0; i < len; i++) h = h * 33 + (unsigned char)name[i];
  return h;
}

int sl__mpi_init(sl_dist_info *info, int workers) {
  int done = 0, provided = 0;
  MPI_Initialized(&done);
  if (!done) {
    int rc = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
    if (rc != MPI_SUCCESS) return sl__err(SL_EIO, "MPI_Init_thread failed (%d)", rc);
    g_inited = true;
  } else MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_SERIALIZED)
    return sl__err(SL_ERROR, "MPI provides thread level %d; sluice needs MPI_THREAD_SERIALIZED", provided);
  /* errors come back as codes, so that a trainer names the failing rank instead of the job aborting */
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &g_size);
  info->rank = g_rank;
  info->size = g_size;
  info->launched = info->mpi = true;
  if (workers >= g_size)
    return sl__err(SL_EINVAL, "--workers %d: the job has %d ranks; at least one must be a trainer", workers, g_size);
  g_workers = workers;
  info->workers = workers;
  info->worker = workers > 0 && g_rank >= g_size - workers;
  g_pids = sl__calloc((size_t)g_size, sizeof *g_pids);
  g_hosts = sl__calloc((size_t)g_size, sizeof *g_hosts);
  if (!g_pids || !g_hosts) return sl__oom("the ranks' table");
  long me[2] = {(long)getpid(), (long)host_hash()};
  long *all = sl__calloc((size_t)g_size * 2, sizeof *all);
  if (!all) return sl__oom("the ranks' table");
  int rc = MPI_Allgather(me, 2, MPI_LONG, all, 2, MPI_LONG, MPI_COMM_WORLD);
  if (rc != MPI_SUCCESS) {
    sl__free(all);
    return mpi_err(rc, "exchanging the ranks' process ids", -1);
  }
  for (int r = 0; r < g_size; r++) {
    g_pids[r] = (pid_t)all[2 * r];
    g_hosts[r] = (unsigned long)all[2 * r + 1];
  }
  sl__free(all);
  sl__dist_hooks h = {0};
  h.shard_auto = shard_auto;
  if (workers > 0 && !info->worker) {
    h.recv_open = t_open;
    h.recv_next = t_next;
    h.recv_close = t_close;
  }
  sl__dist_register(&h);
  return 0;
}

int sl__mpi_finalize(void) {
  if (g_workers > 0 && g_rank < g_size - g_workers && !g_stream_used) {
    /* a trainer that never read (its spec failed, say): its workers still wait for its STOP */
    void *s = NULL;
    t_open(&s, NULL, NULL);
    t_close(s);
  }
  if (g_workers > 0 && g_rank >= g_size - g_workers && !g_served) {
    /* a worker whose run failed before serving (its spec, its files): the trainers must not take its silence for
     * an end of data */
    char msg[128];
    snprintf(msg, sizeof msg, "it did not start serving (its own output says why)");
    pthread_mutex_lock(&g_mu);
    for (int t = 0; t < g_size - g_workers; t++)
      MPI_Send(msg, (int)strlen(msg) + 1, MPI_BYTE, t, TAG_ERROR, MPI_COMM_WORLD);
    pthread_mutex_unlock(&g_mu);
  }
  sl__dist_register(NULL);
  /* a rank on this host that is gone, whoever saw it or not (Open MPI fences in MPI_Finalize: no rank ends
   * normally before every rank has entered it) */
  for (int r = 0; g_pids && r < g_size; r++)
    if (r != g_rank && rank_gone(r)) atomic_store(&g_lost, true);
  sl__free(g_pids);
  sl__free(g_hosts);
  g_pids = NULL;
  g_hosts = NULL;
  int rc = MPI_SUCCESS;
  if (g_inited && !atomic_load(&g_lost)) rc = MPI_Finalize();
  g_inited = false;
  return rc == MPI_SUCCESS ? 0 : sl__err(SL_ERROR, "MPI_Finalize failed (%d)", rc);
}

/* ---------------- worker: serve the part above the cut ---------------- */
typedef struct pend {
  MPI_Request req;
  void *buf;
  size_t cap;
} pend;

typedef struct {
  int nt;              /* trainers: ranks 0 .. nt-1 */
  int *credit;
  bool *stopped;       /* STOP received */
  bool *closed;        /* END or ERROR sent: nothing more goes to it, heartbeats included */
  atomic_bool quit;    /* the heartbeat thread's stop flag */
  atomic_int sending;  /* sends under way: the heartbeat thread drives MPI's progress while there are any */
  pthread_mutex_t beat_mu;
  pthread_cond_t beat_cv;
} wstate;

/* The worker's second thread: heartbeats (a worker busy on a slow element still says it is alive once a second),
 * and progress for the sends under way. Open MPI moves a large message (past its 4 kB eager limit) only inside
 * an MPI call of the sender; the main thread makes those once per element, so the trainer waited for the worker's
 * next element before it got the rest of the current one. */
static void *beat_main(void *arg) {
  wstate *s = arg;
  double last = now_s();
  pthread_mutex_lock(&s->beat_mu);
  while (!atomic_load(&s->quit)) {
    if (atomic_load(&s->sending) > 0) {
      pthread_mutex_unlock(&s->beat_mu);
      int flag = 0;
      pthread_mutex_lock(&g_mu);
      MPI_Iprobe(MPI_ANY_SOURCE, TAG_NONE, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE); /* for its progress */
      pthread_mutex_unlock(&g_mu);
      unsigned us = 100;
      nap(&us);
      pthread_mutex_lock(&s->beat_mu);
    } else {
      int ms = (int)((last + 1 - now_s()) * 1000);
      sl__cond_wait_ms(&s->beat_cv, &s->beat_mu, ms < 1 ? 1 : ms);
    }
    if (atomic_load(&s->quit)) break;
    double t = now_s();
    if (t - last < 1) continue;
    last = t;
    pthread_mutex_lock(&g_mu);
    for (int k = 0; k < s->nt; k++) {
      if (s->closed[k]) continue;
      MPI_Request r;
      /* a non-blocking send, freed at once: a trainer that does not receive must not stall the heartbeat */
      if (MPI_Isend(NULL, 0, MPI_BYTE, k, TAG_BEAT, MPI_COMM_WORLD, &r) == MPI_SUCCESS)
        MPI_Request_free(&r);
    }
    pthread_mutex_unlock(&g_mu);
  }
  pthread_mutex_unlock(&s->beat_mu);
  return NULL;
}

/* Reads what the trainers sent (credits, stops). Called with g_mu held. */
static int w_poll(wstate *s) {
  for (;;) {
    int flag = 0;
    MPI_Status st;
    int rc = MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "waiting for the trainers", -1);
    if (!flag) return 0;
    int32_t v = 0;
    rc = MPI_Recv(&v, 1, MPI_INT32_T, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_err(rc, "receiving from a trainer", st.MPI_SOURCE);
    int t = st.MPI_SOURCE;
    if (t < 0 || t >= s->nt) continue;
    if (st.MPI_TAG == TAG_CREDIT && v > 0) s->credit[t] += v;
    else if (st.MPI_TAG == TAG_STOP) {
      s->stopped[t] = true;
      if (v) atomic_store(&g_lost, true); /* a trainer saw a rank die: this one must not finalise either */
    }
  }
}

/* Sends END (or ERROR text) to trainer t unless it was closed already. Called with g_mu held. */
static void w_close(wstate *s, int t, const char *error) {
  if (s->closed[t]) return;
  s->closed[t] = true;
  if (error) MPI_Send(error, (int)strlen(error) + 1, MPI_BYTE, t, TAG_ERROR, MPI_COMM_WORLD);
  else MPI_Send(NULL, 0, MPI_BYTE, t, TAG_END, MPI_COMM_WORLD);
}

/* The part of the spec above its offload op that this worker rank runs, built and started in *p and *it; *built
 * false when not even the spec could be made (then the error is returned and there is nothing to free). */
static int worker_pipeline(sl_pipeline **p, sl_iter **it, bool *built, const sl_pipeline *full, int nt) {
  json_t *wspec = NULL;
  int rc = sl__offload_worker_spec(&wspec, sl__pipeline_spec(full), g_workers, g_rank - nt);
  if (rc) return rc;
  char *text = json_dumps(wspec, JSON_COMPACT);
  json_decref(wspec);
  if (!text) return sl__oom("the workers' spec");
  *built = true;
  rc = sl_pipeline_from_json(p, text, strlen(text), sl__pipeline_origin(full));
  sl__free(text);
  if (!rc) rc = sl_pipeline_iter(it, *p);
  return rc;
}

/* Finished sends give their buffers to the spares (at most cap buffers exist: spares and sends under way). Called
 * with g_mu held. */
static void reap_sends(pend *pd, int *npend, pend *spare, int *nspare) {
  for (int i = 0; i < *npend;) {
    int done = 0;
    MPI_Test(&pd[i].req, &done, MPI_STATUS_IGNORE);
    if (done) {
      spare[(*nspare)++] = pd[i];
      pd[i] = pd[--*npend];
    } else i++;
  }
}

/* The first trainer from `from` on (round robin) that is open and has credit, or -1. */
static int next_trainer(const wstate *s, int from) {
  for (int k = 0; k < s->nt; k++) {
    int c = (from + k) % s->nt;
    if (!s->closed[c] && s->credit[c] > 0) return c;
  }
  return -1;
}

static void beat_stop(wstate *s, pthread_t beat) {
  pthread_mutex_lock(&s->beat_mu);
  atomic_store(&s->quit, true);
  pthread_cond_signal(&s->beat_cv);
  pthread_mutex_unlock(&s->beat_mu);
  pthread_join(beat, NULL);
}

int sl__mpi_serve(uint64_t *sent, const sl_pipeline *full) {
  *sent = 0;
  g_served = true;
  int nt = g_size - g_workers;
  sl_pipeline *p = NULL;
  sl_iter *it = NULL;
  bool built = false;
  int rc = worker_pipeline(&p, &it, &built, full, nt);
  if (!built) return rc;

  wstate s = {.nt = nt};
  s.credit = sl__calloc((size_t)nt, sizeof *s.credit);
  s.stopped = sl__calloc((size_t)nt, sizeof *s.stopped);
  s.closed = sl__calloc((size_t)nt, sizeof *s.closed);
  int npend = 0, cap = nt * window() + 1, nspare = 0;
  pend *pd = sl__calloc((size_t)cap, sizeof *pd);
  pend *spare = sl__calloc((size_t)cap, sizeof *spare); /* the buffers of finished sends, packed into again */
  if (!s.credit || !s.stopped || !s.closed || !pd || !spare) rc = rc ? rc : sl__oom("the worker's state");
  char err[1024] = "";
  if (rc) snprintf(err, sizeof err, "%s", sl_error_last());
  bool ended = rc != 0;
  int saved = rc;
  pthread_t beat;
  bool beating = false;
  if (s.credit && s.stopped && s.closed && pd && spare) {
    pthread_mutex_init(&s.beat_mu, NULL);
    pthread_cond_init(&s.beat_cv, NULL);
    atomic_init(&s.quit, false);
    atomic_init(&s.sending, 0);
    beating = pthread_create(&beat, NULL, beat_main, &s) == 0;
  } else {
    /* nothing to serve with: tell nobody, the trainers' timeout names this rank */
    sl__free(s.credit);
    sl__free(s.stopped);
    sl__free(s.closed);
    sl__free(pd);
    sl__free(spare);
    sl_iter_free(it);
    sl_pipeline_free(p);
    return rc;
  }
  int next_t = 0;
  unsigned us = 50;
  for (;;) {
    pthread_mutex_lock(&g_mu);
    int prc = w_poll(&s);
    reap_sends(pd, &npend, spare, &nspare);
    atomic_store(&s.sending, npend);
    /* done when every trainer has its END (asked for with STOP, or at the stream's end) and every send is through:
     * a trainer drains until END, so no send stays pending */
    bool all_closed = true;
    for (int t = 0; t < nt; t++) {
      if (s.stopped[t]) w_close(&s, t, NULL);
      if (ended && !s.closed[t]) w_close(&s, t, err[0] ? err : NULL);
      if (!s.closed[t]) all_closed = false;
    }
    pthread_mutex_unlock(&g_mu);
    if (prc && !saved) {
      saved = prc;
      break; /* MPI itself failed: nothing more can be said to the trainers */
    }
    if (all_closed && npend == 0) break;
    int t = ended || npend >= cap ? -1 : next_trainer(&s, next_t);
    if (t < 0) {
      nap(&us);
      continue;
    }
    us = 50;
    next_t = (t + 1) % nt;
    sl_elem e;
    sl_elem_init(&e);
    rc = sl_iter_next(&e, it);
    if (rc == SL_END) {
      ended = true;
      continue;
    }
    void *buf = NULL;
    size_t len = 0, bcap = 0;
    if (nspare > 0) {
      nspare--;
      buf = spare[nspare].buf;
      bcap = spare[nspare].cap;
    }
    if (rc == 0) rc = sl__dist_pack_into(&buf, &bcap, &len, &e);
    sl_elem_clear(&e);
    if (rc) {
      sl__free(buf);
      ended = true;
      saved = rc;
      snprintf(err, sizeof err, "%s", sl_error_last());
      continue;
    }
    pthread_mutex_lock(&g_mu);
    int mrc = MPI_Isend(buf, (int)len, MPI_BYTE, t, TAG_DATA, MPI_COMM_WORLD, &pd[npend].req);
    pthread_mutex_unlock(&g_mu);
    if (mrc != MPI_SUCCESS) {
      sl__free(buf);
      saved = mpi_err(mrc, "sending an element", t);
      break;
    }
    pd[npend].buf = buf;
    pd[npend++].cap = bcap;
    if (npend == 1) { /* wake the heartbeat thread to drive this send */
      pthread_mutex_lock(&s.beat_mu);
      atomic_store(&s.sending, npend);
      pthread_cond_signal(&s.beat_cv);
      pthread_mutex_unlock(&s.beat_mu);
    } else atomic_store(&s.sending, npend);
    s.credit[t]--;
    (*sent)++;
  }
  if (beating) beat_stop(&s, beat);
  pthread_mutex_destroy(&s.beat_mu);
  pthread_cond_destroy(&s.beat_cv);
  for (int i = 0; i < npend; i++) sl__free(pd[i].buf); /* only after an MPI failure */
  for (int i = 0; i < nspare; i++) sl__free(spare[i].buf);
  sl__free(pd);
  sl__free(spare);
  sl__free(s.credit);
  sl__free(s.stopped);
  sl__free(s.closed);
  sl_iter_free(it);
  sl_pipeline_free(p);
  if (saved && err[0]) return sl__err(saved, "%s", err);
  return saved;
}
