package lakehouse.catalog;

import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.hadoop.hive.common.LogUtils;
import org.apache.hadoop.hive.common.auth.HiveAuthUtils;
import org.apache.hadoop.hive.common.metrics.common.Metrics;
import org.apache.hadoop.hive.common.metrics.common.MetricsConstant;
import org.apache.hadoop.hive.common.metrics.common.MetricsFactory;
import org.apache.hadoop.hive.conf.HiveConf;
import org.apache.hadoop.hive.conf.HiveConf.ConfVars;
import org.apache.hadoop.hive.metastore.HiveMetaStore;
import org.apache.hadoop.hive.metastore.IHMSHandler;
import org.apache.hadoop.hive.metastore.TServerSocketKeepAlive;
import org.apache.hadoop.hive.metastore.TSetIpAddressProcessor;
import org.apache.hadoop.hive.metastore.TUGIBasedProcessor;
import org.apache.hadoop.hive.thrift.TUGIContainingTransport;
import org.apache.thrift.TApplicationException;
import org.apache.thrift.TException;
import org.apache.thrift.TProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.protocol.TMessage;
import org.apache.thrift.protocol.TMessageType;
import org.apache.thrift.protocol.TProtocol;
import org.apache.thrift.protocol.TProtocolDecorator;
import org.apache.thrift.protocol.TProtocolUtil;
import org.apache.thrift.protocol.TType;
import org.apache.thrift.server.ServerContext;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TServerEventHandler;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransport;
import org.apache.thrift.transport.TTransportException;
import org.apache.thrift.transport.TTransportFactory;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Hive 2.3 metastore Thrift service (the same handler and processor as HiveMetaStore's main) on a server
 * socket bound to 127.0.0.1, with a watchdog that ends the JVM once nobody uses it.
 *
 * <p>Hive 2.3 has no bind-host setting: HiveMetaStore always listens on every interface, and the metastore has
 * no authentication. This class builds the server the way HiveMetaStore.startMetaStore does for an unsecured
 * metastore (binary protocol, set-UGI processor unless disabled) but binds the loopback address.
 *
 * <p>Usage: {@code LoopbackHiveMetaStore <port> <metastore dir>}. The watchdog (a thread of this JVM, so it
 * lives exactly as long as the metastore) reads, in the metastore dir: {@code leases/<pid>} (one file per
 * process using the metastore, holding that process's start time in clock ticks, so a reused pid does not
 * count) and {@code lifecycle.properties} ({@code keep.alive}, {@code idle.timeout.s}, {@code owner.pid}; the
 * last values read are kept when the file goes away); it writes {@code activity.properties} (open connections,
 * live leases, when it was last used) for {@code sqlext metastore status}. It ends the JVM when the metastore
 * dir (or its warehouse) is deleted or replaced, when the starter has left and nobody uses it, or after the idle
 * timeout. Every call also checks the directory first: a call arriving after the warehouse was deleted gets
 * an error naming it, and the JVM stops at once. The check interval is the system property
 * {@value #CHECK_INTERVAL_PROPERTY} (milliseconds, default 500).
 */
public final class LoopbackHiveMetaStore {
  private static final Logger LOG = LoggerFactory.getLogger(LoopbackHiveMetaStore.class);
  static final String LOOPBACK = "127.0.0.1";
  static final String CHECK_INTERVAL_PROPERTY = "sqlext.metastore.check.interval.ms";
  private static final long DEFAULT_CHECK_INTERVAL_MS = 500;
  /** How long a metastore waits, once a stop rule holds, before it looks again and stops. */
  private static final long SETTLE_MS = 1000;
  /** A shutdown that hangs (a stuck shutdown hook) must not keep an orphan alive: halt after this. */
  private static final long HALT_AFTER_MS = 20_000;

  private LoopbackHiveMetaStore() {}

  public static void main(String[] args) throws Throwable {
    if (args.length != 2) {
      System.err.println("usage: LoopbackHiveMetaStore <port> <metastore dir>");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    Path dir = Paths.get(args[1]).toAbsolutePath();
    // Identify the directory before anything else: a deletion during the slow start-up counts too.
    DirectoryGuard guard = new DirectoryGuard(dir);
    Activity activity = new Activity();
    Watchdog watchdog = new Watchdog(dir, guard, activity, checkIntervalMs());
    Thread watchdogThread = new Thread(watchdog, "metastore-watchdog");
    watchdogThread.setDaemon(true);
    watchdogThread.start();
    HiveConf.setLoadMetastoreConfig(true);
    HiveConf conf = new HiveConf(HiveMetaStore.HMSHandler.class);
    if (System.getProperty("log4j.configurationFile") == null) {
      try {
        LogUtils.initHiveLog4j();
      } catch (LogUtils.LogInitializationException e) {
        LOG.warn(e.getMessage());
      }
    }
    Runtime.getRuntime().addShutdownHook(new Thread(() -> LOG.info("Shutting down hive metastore.")));
    if (conf.getBoolVar(ConfVars.METASTORE_METRICS)) {
      try {
        MetricsFactory.init(conf);
      } catch (Exception e) {
        LOG.error("error in Metrics init", e);
      }
    }
    TServer server = server(conf, port, activity, guard, watchdog);
    watchdog.setServer(server);
    LOG.info("Started the new metaserver on " + LOOPBACK + ":" + port + " (directory checks every "
        + watchdog.intervalMs + " ms)");
    server.serve();
  }

  static long checkIntervalMs() {
    String value = System.getProperty(CHECK_INTERVAL_PROPERTY);
    try {
      long ms = value == null ? DEFAULT_CHECK_INTERVAL_MS : Long.parseLong(value.trim());
      return ms > 0 ? ms : DEFAULT_CHECK_INTERVAL_MS;
    } catch (NumberFormatException e) {
      LOG.warn("ignoring " + CHECK_INTERVAL_PROPERTY + "=" + value + ": not a number of milliseconds");
      return DEFAULT_CHECK_INTERVAL_MS;
    }
  }

  static TServer server(HiveConf conf, int port, Activity activity, DirectoryGuard guard, Watchdog watchdog)
      throws Throwable {
    for (ConfVars unsupported : new ConfVars[] {ConfVars.METASTORE_USE_THRIFT_SASL, ConfVars.HIVE_METASTORE_USE_SSL,
        ConfVars.METASTORE_USE_THRIFT_FRAMED_TRANSPORT, ConfVars.METASTORE_USE_THRIFT_COMPACT_PROTOCOL}) {
      if (conf.getBoolVar(unsupported)) {
        throw new IllegalArgumentException(unsupported.varname + "=true is not supported by the embedded metastore");
      }
    }
    markRemote();
    long maxMessageSize = conf.getLongVar(ConfVars.METASTORESERVERMAXMESSAGESIZE);
    HiveMetaStore.HMSHandler baseHandler = new HiveMetaStore.HMSHandler("new db based metaserver", conf, false);
    IHMSHandler handler = HiveMetaStore.newRetryingHMSHandler(baseHandler, conf);
    TProcessor processor;
    TTransportFactory transportFactory;
    if (conf.getBoolVar(ConfVars.METASTORE_EXECUTE_SET_UGI)) {
      transportFactory = new TUGIContainingTransport.Factory();
      processor = new TUGIBasedProcessor<IHMSHandler>(handler);
    } else {
      transportFactory = new TTransportFactory();
      processor = new TSetIpAddressProcessor<IHMSHandler>(handler);
    }
    TServerSocket socket = HiveAuthUtils.getServerSocket(LOOPBACK, port);
    if (conf.getBoolVar(ConfVars.METASTORE_TCP_KEEP_ALIVE)) {
      socket = new TServerSocketKeepAlive(socket);
    }
    TThreadPoolServer.Args serverArgs = new TThreadPoolServer.Args(socket)
        .processor(new GuardedProcessor(processor, guard, watchdog))
        .transportFactory(transportFactory)
        .protocolFactory(new TBinaryProtocol.Factory())
        .inputProtocolFactory(new TBinaryProtocol.Factory(true, true, maxMessageSize, maxMessageSize))
        .minWorkerThreads(conf.getIntVar(ConfVars.METASTORESERVERMINTHREADS))
        .maxWorkerThreads(conf.getIntVar(ConfVars.METASTORESERVERMAXTHREADS));
    TServer server = new TThreadPoolServer(serverArgs);
    server.setServerEventHandler(new CountingEventHandler(activity));
    return server;
  }

  /** HiveMetaStore.isMetaStoreRemote() must say true, as it does under HiveMetaStore's own main. */
  private static void markRemote() throws ReflectiveOperationException {
    Field remote = HiveMetaStore.class.getDeclaredField("isMetaStoreRemote");
    remote.setAccessible(true);
    remote.setBoolean(null, true);
  }

  /** Open connections and the time of the last call, as the Thrift server reports them. */
  static final class Activity {
    final AtomicInteger connections = new AtomicInteger();
    final AtomicLong lastCallMs = new AtomicLong(System.currentTimeMillis());
  }

  /** HiveMetaStore's per-connection bookkeeping (metrics, the thread's RawStore) plus the activity counts. */
  static final class CountingEventHandler implements TServerEventHandler {
    private final Activity activity;
    private final Method cleanupRawStore;

    CountingEventHandler(Activity activity) throws ReflectiveOperationException {
      this.activity = activity;
      // Closing a connection must release the worker thread's RawStore, as HiveMetaStore's handler does.
      cleanupRawStore = HiveMetaStore.class.getDeclaredMethod("cleanupRawStore");
      cleanupRawStore.setAccessible(true);
    }

    @Override
    public void preServe() {}

    @Override
    public ServerContext createContext(TProtocol input, TProtocol output) {
      // Only calls and connections the watchdog sees open count as use: a bare port probe (a status check)
      // must not keep an idle metastore alive.
      activity.connections.incrementAndGet();
      Metrics metrics = MetricsFactory.getInstance();
      if (metrics != null) {
        metrics.incrementCounter(MetricsConstant.OPEN_CONNECTIONS);
      }
      return null;
    }

    @Override
    public void deleteContext(ServerContext context, TProtocol input, TProtocol output) {
      activity.connections.decrementAndGet();
      Metrics metrics = MetricsFactory.getInstance();
      if (metrics != null) {
        metrics.decrementCounter(MetricsConstant.OPEN_CONNECTIONS);
      }
      try {
        cleanupRawStore.invoke(null);
      } catch (ReflectiveOperationException e) {
        LOG.warn("could not clean up the connection's RawStore", e);
      }
    }

    @Override
    public void processContext(ServerContext context, TTransport input, TTransport output) {
      activity.lastCallMs.set(System.currentTimeMillis());
    }
  }

  /**
   * The metastore directory as it was when the JVM started, checked by every call and by the watchdog: the
   * Derby database and the leases live there, so once it is deleted (or replaced by a new directory of the same
   * name) nobody can ever use this metastore again.
   */
  static final class DirectoryGuard {
    /** Start of every "directory gone" message: catalog/metastore_client.py turns these into a typed error. */
    static final String PREFIX = "the embedded Hive metastore of warehouse ";
    private final Path dir;
    private final Path warehouse;
    private final Object dirKey;

    DirectoryGuard(Path dir) {
      this.dir = dir;
      this.warehouse = dir.getParent();
      this.dirKey = fileKey(dir);
    }

    /** Why the directory is no longer the one this metastore started in; null while it is. */
    String problem() {
      Object now = fileKey(dir);
      if (now != null && (dirKey == null || now.equals(dirKey))) {
        return null;  // one stat per call: cheap next to any metastore call
      }
      // The same words as catalog/embedded_metastore.py's directory_gone (status of an orphan).
      String what;
      if (fileKey(warehouse) == null) {
        what = "its warehouse directory " + warehouse + " was deleted";
      } else if (now == null) {
        what = "its directory " + dir + " was deleted";
      } else {
        what = "its directory " + dir + " was replaced by another one";
      }
      return PREFIX + warehouse + " stopped: " + what + " (with the Derby database holding its tables)";
    }

    /** The (device, inode) identity of a path; null when it does not exist (or the file system has none). */
    private static Object fileKey(Path path) {
      try {
        BasicFileAttributes attrs = Files.readAttributes(path, BasicFileAttributes.class);
        return attrs.isDirectory() ? (attrs.fileKey() != null ? attrs.fileKey() : path) : null;
      } catch (IOException | RuntimeException e) {
        return null;
      }
    }
  }

  /** Checks the directory before each call is processed (see {@link GuardedInput}). */
  static final class GuardedProcessor implements TProcessor {
    private final TProcessor delegate;
    private final DirectoryGuard guard;
    private final Watchdog watchdog;

    GuardedProcessor(TProcessor delegate, DirectoryGuard guard, Watchdog watchdog) {
      this.delegate = delegate;
      this.guard = guard;
      this.watchdog = watchdog;
    }

    @Override
    public void process(TProtocol in, TProtocol out) throws TException {
      delegate.process(new GuardedInput(in, out, guard, watchdog), out);
    }
  }

  /**
   * The input protocol of one call: once the call's header has arrived, a deleted directory answers it with an
   * application error naming the warehouse (instead of serving it from a Derby database whose files are gone),
   * closes the connection and stops the metastore. The check sits here because the Thrift server only hands
   * a processor the connection, and the call arrives inside the processor's first read.
   */
  static final class GuardedInput extends TProtocolDecorator {
    private final TProtocol out;
    private final DirectoryGuard guard;
    private final Watchdog watchdog;

    GuardedInput(TProtocol in, TProtocol out, DirectoryGuard guard, Watchdog watchdog) {
      super(in);
      this.out = out;
      this.guard = guard;
      this.watchdog = watchdog;
    }

    @Override
    public TMessage readMessageBegin() throws TException {
      TMessage message = super.readMessageBegin();
      String problem = guard.problem();
      if (problem == null) {
        return message;
      }
      TProtocolUtil.skip(this, TType.STRUCT);  // the call's arguments: read, so the reply is well-formed
      super.readMessageEnd();
      out.writeMessageBegin(new TMessage(message.name, TMessageType.EXCEPTION, message.seqid));
      new TApplicationException(TApplicationException.INTERNAL_ERROR, problem).write(out);
      out.writeMessageEnd();
      out.getTransport().flush();
      watchdog.stopNow(problem);
      throw new TTransportException(TTransportException.END_OF_FILE, problem);  // ends this connection
    }
  }

  /** The lifecycle settings as last read; kept when the file is missing or unreadable. */
  record Lifecycle(boolean keepAlive, long idleTimeoutS, long ownerPid) {
    /** Before the first read: on demand of nobody, stopped after the default 10 minutes unused. */
    static final Lifecycle DEFAULT = new Lifecycle(false, 600, 0);

    static Lifecycle read(Path file, Lifecycle previous) {
      Properties p = new Properties();
      try (InputStream in = Files.newInputStream(file)) {
        p.load(in);
        return new Lifecycle(Boolean.parseBoolean(p.getProperty("keep.alive", "false")),
            Long.parseLong(p.getProperty("idle.timeout.s", "0").trim()),
            Long.parseLong(p.getProperty("owner.pid", "0").trim()));
      } catch (IOException | RuntimeException e) {
        return previous;  // a deleted or half-written file must not lift the rules (nor end a service)
      }
    }
  }

  /**
   * Ends the JVM when the metastore can no longer be used or is no longer used (see the class comment and
   * catalog/metastore_lifecycle.py). It never dies on an error: a dead watchdog is a metastore that runs forever.
   */
  static final class Watchdog implements Runnable {
    private static final int ACTIVITY_FILE_SIZE = 256;
    private final Path dir;
    private final DirectoryGuard guard;
    private final Activity activity;
    final long intervalMs;
    private final Object wake = new Object();
    private volatile TServer server;
    private volatile String urgentReason;
    private Lifecycle lifecycle = Lifecycle.DEFAULT;
    private long lastUsedMs = System.currentTimeMillis();
    private String lastWritten = "";
    private FileChannel activityFile;

    Watchdog(Path dir, DirectoryGuard guard, Activity activity, long intervalMs) {
      this.dir = dir;
      this.guard = guard;
      this.activity = activity;
      this.intervalMs = intervalMs;
      this.lifecycle = Lifecycle.read(dir.resolve("lifecycle.properties"), Lifecycle.DEFAULT);
      try {
        // Created once and then only overwritten in place: a watchdog that created files (a temporary file to
        // rename) while someone deletes the warehouse would make that deletion fail ("directory not empty").
        activityFile = FileChannel.open(dir.resolve("activity.properties"), StandardOpenOption.CREATE,
            StandardOpenOption.WRITE);
      } catch (IOException e) {
        LOG.warn("metastore watchdog: cannot write activity.properties: " + e);
      }
    }

    /** The server is about to serve: check now (status shows its activity at once) and from now on. */
    void setServer(TServer server) {
      activity.lastCallMs.set(System.currentTimeMillis());  // idle time counts from here, not from the JVM's start
      this.server = server;
      synchronized (wake) {
        wake.notifyAll();
      }
    }

    /** Stop without the settle time (a call found the directory gone). */
    void stopNow(String reason) {
      urgentReason = reason;
      synchronized (wake) {
        wake.notifyAll();
      }
    }

    @Override
    public void run() {
      while (true) {
        try {
          pause(intervalMs, true);
          String reason = urgentReason != null ? urgentReason : stopReason();
          if (reason != null && urgentReason == null) {
            pause(SETTLE_MS, false);  // a process may be attaching right now: look once more
            reason = urgentReason != null ? urgentReason : stopReason();
          }
          if (reason != null) {
            stop(reason);
            return;
          }
        } catch (Throwable e) {
          LOG.warn("metastore watchdog: " + e);
        }
      }
    }

    /** Waits `ms`; returns early on stopNow() and, with `untilServing`, when the server starts serving. */
    private void pause(long ms, boolean untilServing) {
      long deadline = System.currentTimeMillis() + ms;
      synchronized (wake) {
        while (urgentReason == null && System.currentTimeMillis() < deadline) {
          boolean serving = server != null;
          try {
            wake.wait(Math.max(1, deadline - System.currentTimeMillis()));
          } catch (InterruptedException e) {
            // nobody is meant to interrupt it; carry on checking
          }
          if (untilServing && !serving && server != null) {
            return;
          }
        }
      }
    }

    /** Why the metastore should stop now, or null while it is in use (or kept alive). */
    String stopReason() throws IOException {
      String gone = guard.problem();
      if (gone != null) {
        return gone;  // whoever still holds a lease or a connection can never be served again
      }
      lifecycle = Lifecycle.read(dir.resolve("lifecycle.properties"), lifecycle);
      int leases = liveLeases();
      int connections = activity.connections.get();
      long now = System.currentTimeMillis();
      boolean inUse = leases > 0 || connections > 0;
      lastUsedMs = Math.max(inUse ? now : lastUsedMs, activity.lastCallMs.get());
      writeActivity(connections, leases, inUse);
      if (inUse) {
        return null;
      }
      long unusedMs = now - lastUsedMs;
      long ownerPid = lifecycle.ownerPid();
      if (!lifecycle.keepAlive() && ownerPid > 0 && !isLease(ownerPid) && unusedMs >= SETTLE_MS) {
        return "the process that started it (pid " + ownerPid + ") has left and no other process uses it";
      }
      long idleTimeoutS = lifecycle.idleTimeoutS();
      if (idleTimeoutS > 0 && unusedMs >= idleTimeoutS * 1000 && server != null) {
        return "unused for " + unusedMs / 1000 + "s (idle timeout " + idleTimeoutS + "s)";
      }
      return null;
    }

    private void stop(String reason) {
      LOG.info("Stopping the embedded metastore: " + reason);
      // also in metastore.out: a stop during start-up comes before Hive's logging is set up
      System.err.println("Stopping the embedded metastore: " + reason);
      Thread halt = new Thread(() -> {
        try {
          Thread.sleep(HALT_AFTER_MS);
        } catch (InterruptedException e) {
          // halt now
        }
        Runtime.getRuntime().halt(1);
      }, "metastore-halt");
      halt.setDaemon(true);
      halt.start();
      TServer running = server;
      if (running != null) {
        running.stop();  // no new connections from here on
      }
      System.exit(0);
    }

    /** Live leases; the files of processes that have exited are removed. */
    private int liveLeases() throws IOException {
      Path leases = dir.resolve("leases");
      if (!Files.isDirectory(leases)) {
        return 0;
      }
      int live = 0;
      try (DirectoryStream<Path> files = Files.newDirectoryStream(leases)) {
        for (Path file : files) {
          String name = file.getFileName().toString();
          if (!name.matches("[0-9]+")) {
            continue;  // a lease being written (tmp file)
          }
          if (isLease(Long.parseLong(name))) {
            live++;
          } else {
            Files.deleteIfExists(file);
          }
        }
      }
      return live;
    }

    /** Whether leases/<pid> exists and its process is the one that wrote it. */
    private boolean isLease(long pid) {
      Path file = dir.resolve("leases").resolve(Long.toString(pid));
      try {
        return ProcessStart.matches(pid, new String(Files.readAllBytes(file)).trim());
      } catch (IOException e) {
        return false;
      }
    }

    /** Overwrites activity.properties in place with a fixed-size record (padded with a comment line). */
    private void writeActivity(int connections, int leases, boolean inUse) {
      String key = connections + "/" + leases + "/" + (inUse ? -1 : lastUsedMs);
      if (activityFile == null || key.equals(lastWritten)) {
        return;
      }
      String text = "pid=" + ProcessHandle.current().pid() + "\nconnections=" + connections + "\nleases=" + leases
          + "\nlast.used.ms=" + (inUse ? System.currentTimeMillis() : lastUsedMs) + "\nin.use=" + inUse
          + "\ncheck.interval.ms=" + intervalMs + "\n#";
      byte[] record = (text + " ".repeat(Math.max(0, ACTIVITY_FILE_SIZE - text.length() - 1)) + "\n")
          .getBytes(StandardCharsets.US_ASCII);
      try {
        activityFile.write(ByteBuffer.wrap(record), 0);  // one write, no truncate first: never an empty file
        activityFile.truncate(record.length);
        lastWritten = key;
      } catch (IOException e) {
        LOG.debug("metastore watchdog: cannot write activity.properties: " + e);
      }
    }
  }

  /** A process's start time, so a lease of an exited process is not taken over by a new one with its pid. */
  static final class ProcessStart {
    private ProcessStart() {}

    static boolean matches(long pid, String recorded) {
      Path stat = Paths.get("/proc", Long.toString(pid), "stat");
      if (!Files.isDirectory(Paths.get("/proc/self"))) {  // no procfs: liveness only
        return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
      }
      try {
        // "pid (comm) STATE ppid ...": comm may hold spaces, so count fields after the last ')'.
        String text = new String(Files.readAllBytes(stat));
        String[] fields = text.substring(text.lastIndexOf(')') + 2).split(" ");
        return !fields[0].equals("Z") && (recorded.isEmpty() || fields[19].equals(recorded));
      } catch (IOException | RuntimeException e) {
        return false;
      }
    }
  }
}
