package lakehouse.catalog;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.util.Progressable;

/**
 * The embedded metastore's file system for object-store schemes (s3a, s3, s3n, gs): pyspark ships no Hadoop
 * connector for them, yet Hive 2.3's metastore resolves a table's or partition's location on its file system
 * before it records it (is it a directory? may the caller write to its parent?). The tables' bytes are written
 * and read by sqlext through its own storage layer, never by the metastore, so here every location is an
 * existing, empty, writable directory, and nothing is ever read, written or deleted.
 */
public final class LocationOnlyFileSystem extends FileSystem {
    private URI uri;
    private Path workingDir;

    @Override
    public void initialize(URI name, Configuration conf) throws IOException {
        super.initialize(name, conf);
        setConf(conf);
        uri = URI.create(name.getScheme() + "://" + (name.getAuthority() == null ? "" : name.getAuthority()));
        workingDir = new Path(uri.toString() + "/");
    }

    @Override
    public String getScheme() {
        return uri == null ? "s3a" : uri.getScheme();
    }

    @Override
    public URI getUri() {
        return uri;
    }

    @Override
    public FileStatus getFileStatus(Path path) throws IOException {
        String user = UserGroupInformation.getCurrentUser().getShortUserName();
        return new FileStatus(0L, true, 1, 0L, 0L, 0L, new FsPermission((short) 0777), user, user,
                makeQualified(path));
    }

    @Override
    public FileStatus[] listStatus(Path path) throws FileNotFoundException, IOException {
        return new FileStatus[0];
    }

    @Override
    public boolean mkdirs(Path path, FsPermission permission) {
        return true;
    }

    @Override
    public boolean delete(Path path, boolean recursive) {
        return true;  // sqlext removes a managed table's files itself, through its storage layer
    }

    @Override
    public boolean rename(Path src, Path dst) throws IOException {
        throw unsupported("rename", src);
    }

    @Override
    public FSDataInputStream open(Path path, int bufferSize) throws IOException {
        throw unsupported("open", path);
    }

    @Override
    public FSDataOutputStream create(Path path, FsPermission permission, boolean overwrite, int bufferSize,
                                     short replication, long blockSize, Progressable progress) throws IOException {
        throw unsupported("create", path);
    }

    @Override
    public FSDataOutputStream append(Path path, int bufferSize, Progressable progress) throws IOException {
        throw unsupported("append", path);
    }

    @Override
    public void setWorkingDirectory(Path dir) {
        workingDir = dir;
    }

    @Override
    public Path getWorkingDirectory() {
        return workingDir;
    }

    private static IOException unsupported(String what, Path path) {
        return new IOException("the embedded metastore records object-store locations only; it cannot " + what
                + " " + path);
    }
}
