package lakehouse.catalog;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
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
import org.apache.thrift.TProcessor;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.protocol.TProtocol;
import org.apache.thrift.server.ServerContext;
import org.apache.thrift.server.TServer;
import org.apache.thrift.server.TServerEventHandler;
import org.apache.thrift.server.TThreadPoolServer;
import org.apache.thrift.transport.TServerSocket;
import org.apache.thrift.transport.TTransport;
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
 * <p>Usage: {@code LoopbackHiveMetaStore <port> <metastore dir>}. The watchdog reads, in the metastore dir:
 * {@code leases/<pid>} (one file per process using the metastore, holding that process's start time in clock
 * ticks, so a reused pid does not count) and {@code lifecycle.properties} ({@code keep.alive},
 * {@code idle.timeout.s}, {@code owner.pid}); it writes {@code activity.properties} (open connections, live
 * leases, when it was last used) for {@code sqlext metastore status}.
 */
public final class LoopbackHiveMetaStore {
  private static final Logger LOG = LoggerFactory.getLogger(LoopbackHiveMetaStore.class);
  static final String LOOPBACK = "127.0.0.1";
  private static final long POLL_MS = 500;
  /** How long an on-demand metastore waits, unused and without its starter, before it stops. */
  private static final long SETTLE_MS = 1000;

  private LoopbackHiveMetaStore() {}

  public static void main(String[] args) throws Throwable {
    if (args.length != 2) {
      System.err.println("usage: LoopbackHiveMetaStore <port> <metastore dir>");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    Path dir = Paths.get(args[1]);
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
    Activity activity = new Activity();
    TServer server = server(conf, port, activity);
    Thread watchdog = new Thread(new Watchdog(dir, activity, server), "metastore-watchdog");
    watchdog.setDaemon(true);
    watchdog.start();
    LOG.info("Started the new metaserver on " + LOOPBACK + ":" + port);
    server.serve();
  }

  static TServer server(HiveConf conf, int port, Activity activity) throws Throwable {
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
        .processor(processor)
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

  /** Ends the JVM when the metastore is no longer used (see the class comment and catalog/metastore_lifecycle.py). */
  static final class Watchdog implements Runnable {
    private final Path dir;
    private final Activity activity;
    private final TServer server;
    private long lastUsedMs = System.currentTimeMillis();
    private String lastWritten = "";

    Watchdog(Path dir, Activity activity, TServer server) {
      this.dir = dir;
      this.activity = activity;
      this.server = server;
    }

    @Override
    public void run() {
      while (true) {
        try {
          Thread.sleep(POLL_MS);
          String reason = stopReason();
          if (reason != null) {
            Thread.sleep(SETTLE_MS);  // a process may be attaching right now: look once more
            if (stopReason() != null) {
              stop(reason);
              return;
            }
          }
        } catch (InterruptedException e) {
          return;
        } catch (Exception e) {
          LOG.warn("metastore watchdog: " + e);
        }
      }
    }

    /** Why the metastore should stop now, or null while it is in use (or kept alive). */
    String stopReason() throws IOException {
      Properties lifecycle = read(dir.resolve("lifecycle.properties"));
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
      boolean keepAlive = Boolean.parseBoolean(lifecycle.getProperty("keep.alive", "false"));
      long ownerPid = Long.parseLong(lifecycle.getProperty("owner.pid", "0"));
      if (!keepAlive && ownerPid > 0 && !isLease(ownerPid) && unusedMs >= SETTLE_MS) {
        return "the process that started it (pid " + ownerPid + ") has left and no other process uses it";
      }
      long idleTimeoutS = Long.parseLong(lifecycle.getProperty("idle.timeout.s", "0"));
      if (idleTimeoutS > 0 && unusedMs >= idleTimeoutS * 1000) {
        return "unused for " + unusedMs / 1000 + "s (idle timeout " + idleTimeoutS + "s)";
      }
      return null;
    }

    private void stop(String reason) {
      LOG.info("Stopping the embedded metastore: " + reason);
      server.stop();  // no new connections from here on
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

    private void writeActivity(int connections, int leases, boolean inUse) throws IOException {
      String key = connections + "/" + leases + "/" + (inUse ? -1 : lastUsedMs);
      if (key.equals(lastWritten)) {
        return;
      }
      Properties p = new Properties();
      p.setProperty("pid", Long.toString(ProcessHandle.current().pid()));
      p.setProperty("connections", Integer.toString(connections));
      p.setProperty("leases", Integer.toString(leases));
      p.setProperty("last.used.ms", Long.toString(inUse ? System.currentTimeMillis() : lastUsedMs));
      p.setProperty("in.use", Boolean.toString(inUse));
      Path tmp = dir.resolve("activity.properties.tmp");
      try (OutputStream out = Files.newOutputStream(tmp)) {
        p.store(out, null);
      }
      Files.move(tmp, dir.resolve("activity.properties"), StandardCopyOption.REPLACE_EXISTING,
          StandardCopyOption.ATOMIC_MOVE);
      lastWritten = key;
    }

    private static Properties read(Path file) throws IOException {
      Properties p = new Properties();
      if (Files.exists(file)) {
        try (InputStream in = Files.newInputStream(file)) {
          p.load(in);
        }
      }
      return p;
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
